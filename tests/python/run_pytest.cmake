# The Python package end to end: a venv of Debian's python3 (with its system site-packages,
# for python3-pytest and python3-numpy), `pip install --no-index ./python` into it (the
# in-tree backend bundles the libgeist.so of this build; no network), then python/tests with
# pytest against the installed package, then examples/prefix_reuse.py.
# Inputs: -DPYTHON=<python3> -DSOURCE_DIR=<repo> -DLIB=<libgeist.so> -DCLI=<geist binary>
#         -DWORK_DIR=<scratch directory>.
if(DEFINED ENV{GEIST_FIXTURES} AND NOT "$ENV{GEIST_FIXTURES}" STREQUAL "")
  set(fixtures "$ENV{GEIST_FIXTURES}")
else()
  set(fixtures "${SOURCE_DIR}/../shared/fixtures")
endif()

execute_process(COMMAND "${PYTHON}" -c "import pytest" RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PYTHON} has no pytest: run scripts/install_deps.sh (python3-pytest)")
endif()

set(venv "${WORK_DIR}/venv")
file(REMOVE_RECURSE "${venv}")
execute_process(COMMAND "${PYTHON}" -m venv --system-site-packages "${venv}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "python3 -m venv failed (${rc}): scripts/install_deps.sh installs python3-venv")
endif()
set(ENV{GEIST_LIBRARY} "${LIB}")
set(ENV{PIP_NO_INDEX} "1")
set(ENV{PIP_DISABLE_PIP_VERSION_CHECK} "1")
execute_process(COMMAND "${venv}/bin/python" -m pip install --no-index "${SOURCE_DIR}/python"
                WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pip install ./python failed (${rc})")
endif()
unset(ENV{GEIST_LIBRARY})  # the tests use the library the wheel bundled

set(ENV{GEIST_CLI} "${CLI}")
set(ENV{GEIST_EXPECT_INSTALLED} "1")
# pytest exits 5 when it collected no tests: that is a failure here like any other non-zero.
execute_process(COMMAND "${venv}/bin/python" -m pytest -q -rs -p no:cacheprovider
                        "${SOURCE_DIR}/python/tests"
                WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc)
if(rc EQUAL 5)
  message(FATAL_ERROR "pytest collected no tests (exit 5)")
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "pytest failed (exit ${rc})")
endif()

set(model "${fixtures}/models/stories260K.gguf")
if(NOT EXISTS "${model}")
  if("$ENV{GEIST_REQUIRE_FIXTURES}" STREQUAL "1")
    message(FATAL_ERROR "fixtures required (GEIST_REQUIRE_FIXTURES=1) but ${model} is missing")
  endif()
  message("*** SKIPPED: fixtures not found at ${fixtures} (set GEIST_FIXTURES) ***")
  return()
endif()
execute_process(COMMAND "${venv}/bin/python" "${SOURCE_DIR}/examples/prefix_reuse.py" "${model}"
                WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_VARIABLE out RESULT_VARIABLE rc)
message("example output:\n${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "examples/prefix_reuse.py exited with ${rc}")
endif()
