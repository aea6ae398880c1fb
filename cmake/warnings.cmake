# int8attn_target_warnings(<target>...): -Wall -Wextra for every C and C++ source and for the
# host side of CUDA sources, nvcc's own warnings for device code, and all of them errors when
# INT8ATTN_WARNINGS_AS_ERRORS is ON (CI builds that way). Used by the library, the tool, the
# reference library and the tests.
include_guard(GLOBAL)

function(int8attn_target_warnings)
  foreach(target ${ARGN})
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra>
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --Wreorder>)
    if(INT8ATTN_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE
        $<$<COMPILE_LANGUAGE:C,CXX>:-Werror>
        $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
    endif()
  endforeach()
endfunction()
