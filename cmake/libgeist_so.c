/* libgeist.so: every object of geist_api is linked in whole (WHOLE_ARCHIVE, see
 * CMakeLists.txt) and cmake/libgeist.map exports its geist_* functions. A shared library
 * target needs one source of its own; this is it. */
typedef int geist_libgeist_so_has_no_code_of_its_own;
