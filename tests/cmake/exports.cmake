# Only int8attn_* symbols may be exported from the shared library (hidden visibility + version
# script). Checked with `nm -D --defined-only` by tests/cmake/check_exports.sh.
find_program(INT8ATTN_NM NAMES nm)
if(INT8ATTN_NM AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
  add_test(NAME exported_symbols
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cmake/check_exports.sh ${INT8ATTN_NM}
                   $<TARGET_FILE:int8attn> ${PROJECT_SOURCE_DIR}/include/int8attn.h)
  set_tests_properties(exported_symbols PROPERTIES LABELS "cpu")
endif()
