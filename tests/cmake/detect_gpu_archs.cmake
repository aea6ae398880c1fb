# The GPU-architecture detection behind the default INT8ATTN_CUDA_ARCHS
# (cmake/detect_gpu_archs.cmake), in script mode against a fake nvidia-smi: runs everywhere.
add_test(NAME cmake_detect_gpu_archs
         COMMAND ${CMAKE_COMMAND} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/detect_gpu_archs
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/script/detect_gpu_archs_test.cmake)
set_tests_properties(cmake_detect_gpu_archs PROPERTIES LABELS "cpu")
