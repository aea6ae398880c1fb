# Script-mode test of int8attn_detect_gpu_archs() (cmake/detect_gpu_archs.cmake) against a fake
# nvidia-smi: the compute-capability mapping (9.0 -> 90a, 8.9 -> 89, other 8.x -> 80, others
# skipped with a note), the canonical order, and a failing nvidia-smi (no driver).
# Run by CTest as `cmake -DWORK_DIR=<dir> -P detect_gpu_archs_test.cmake`.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/../../../cmake/detect_gpu_archs.cmake)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(ENV{PATH} "${WORK_DIR}:$ENV{PATH}")

function(expect_detect script want_archs want_desc_regex)
  file(WRITE "${WORK_DIR}/nvidia-smi" "#!/bin/sh\n${script}\n")
  file(CHMOD "${WORK_DIR}/nvidia-smi" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  unset(INT8ATTN_NVIDIA_SMI)
  unset(INT8ATTN_NVIDIA_SMI CACHE)
  int8attn_detect_gpu_archs(archs desc)
  if(NOT archs STREQUAL "${want_archs}" OR NOT desc MATCHES "${want_desc_regex}")
    message(FATAL_ERROR "nvidia-smi printing `${script}`: got archs '${archs}' (want "
                        "'${want_archs}'), description '${desc}' (want /${want_desc_regex}/)")
  endif()
  message(STATUS "ok: ${archs} | ${desc}")
endfunction()

expect_detect("printf 'NVIDIA H100 80GB HBM3, 9.0\\nNVIDIA A10, 8.6\\nTesla T4, 7.5\\nNVIDIA H100 80GB HBM3, 9.0\\n'"
              "80;90a" "H100 80GB HBM3 \\(9.0 -> 90a\\).*A10 \\(8.6 -> 80\\).*T4 \\(7.5: no int8attn kernels")
expect_detect("echo 'NVIDIA L40S, 8.9'" "89" "L40S \\(8.9 -> 89\\)")
expect_detect("echo 'NVIDIA A100-SXM4-80GB, 8.0'" "80" "8.0 -> 80")
expect_detect("echo 'NVIDIA B200, 10.0'" "" "B200 \\(10.0: no int8attn kernels")
expect_detect("echo 'NVIDIA-SMI has failed because it could not communicate with the driver'; exit 9"
              "" "no GPU \\(nvidia-smi reports none\\)")
