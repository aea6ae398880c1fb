# The public header must compile as strict C99 and as C++17 with every warning an error.
# (Included by tests/CMakeLists.txt.)
add_executable(test_header_c99 ${CMAKE_CURRENT_SOURCE_DIR}/test_header_c99.c)
set_target_properties(test_header_c99 PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON
                                                 C_EXTENSIONS OFF)
target_compile_options(test_header_c99 PRIVATE -Wall -Wextra -pedantic -Werror)
target_link_libraries(test_header_c99 PRIVATE int8attn::int8attn)
add_test(NAME test_header_c99 COMMAND test_header_c99)
set_tests_properties(test_header_c99 PROPERTIES LABELS "cpu")

# tests/test_header_cpp17.cpp is also a GoogleTest (globbed); tighten its flags here.
if(TARGET test_header_cpp17)
  set_target_properties(test_header_cpp17 PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                                                     CXX_EXTENSIONS OFF)
  target_compile_options(test_header_cpp17 PRIVATE -Wall -Wextra -pedantic -Werror)
endif()
