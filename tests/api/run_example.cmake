# Runs examples/simple.c's binary on stories260K from BOS alone (empty prompt) and checks the
# greedy text that the fixture README documents for this model.
# Inputs: -DEXE=<binary> -DSOURCE_DIR=<repo root>.
if(DEFINED ENV{GEIST_FIXTURES} AND NOT "$ENV{GEIST_FIXTURES}" STREQUAL "")
  set(fixtures "$ENV{GEIST_FIXTURES}")
else()
  set(fixtures "${SOURCE_DIR}/../shared/fixtures")
endif()
set(model "${fixtures}/models/stories260K.gguf")
if(NOT EXISTS "${model}")
  if("$ENV{GEIST_REQUIRE_FIXTURES}" STREQUAL "1")
    message(FATAL_ERROR "fixtures required (GEIST_REQUIRE_FIXTURES=1) but ${model} is missing")
  endif()
  message("*** SKIPPED: fixtures not found at ${fixtures} (set GEIST_FIXTURES) ***")
  return()
endif()

execute_process(COMMAND "${EXE}" "${model}" "" 24
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("example output: ${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "geist_example_simple exited with ${rc}: ${err}")
endif()
set(expected "Once upon a time, there was a little girl named Lily")
string(FIND "${out}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "output does not contain \"${expected}\"")
endif()
