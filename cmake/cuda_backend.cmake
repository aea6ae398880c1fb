# Whether the CUDA backend is built, and for which GPU architectures; says both, and why, at
# configure time. Included from the top-level CMakeLists.txt after check_language(CUDA).
#
# Explicit settings win: -DINT8ATTN_ENABLE_CUDA=ON|OFF, -DINT8ATTN_CUDA_ARCHS=<list>|all.
# Left empty (the default), the CUDA backend is built when a CUDA compiler is found AND
#   - INT8ATTN_CUDA_ARCHS names architectures (e.g. 90a: CI compiles sm_90a without a GPU), or
#   - nvidia-smi reports a GPU with int8attn kernels: then only for the GPUs present.
# With nvcc but no GPU the default is the CPU backend alone: every architecture's kernels cost
# minutes to compile on a small machine (about 12 min for all three on 2 cores, against 10 s for
# the CPU build) for a backend that cannot run there. The published wheel asks for every
# architecture (CMAKE_ARGS=-DINT8ATTN_CUDA_ARCHS=all).
#
# Sets the normal variables INT8ATTN_ENABLE_CUDA (ON/OFF) and INT8ATTN_CUDA_ARCHS (the resolved
# list), which shadow the cache entries (the user's requests) for the rest of the configure.

set(INT8ATTN_ALL_CUDA_ARCHS "80;89;90a")
set(INT8ATTN_ENABLE_CUDA "" CACHE STRING
    "Build the CUDA backend: ON, OFF, or empty (ON when nvcc is found and a GPU is present or INT8ATTN_CUDA_ARCHS is set)")
set(INT8ATTN_CUDA_ARCHS "" CACHE STRING
    "CUDA architectures, any of 80;89;90a, or all; empty = those of the GPUs present")
set_property(CACHE INT8ATTN_ENABLE_CUDA PROPERTY STRINGS "" ON OFF)

include(${CMAKE_CURRENT_LIST_DIR}/detect_gpu_archs.cmake)

set(_req_enable "${INT8ATTN_ENABLE_CUDA}")
set(_req_archs "${INT8ATTN_CUDA_ARCHS}")
set(_force_hint "-DINT8ATTN_ENABLE_CUDA=ON (all architectures) or -DINT8ATTN_CUDA_ARCHS=90a|89|80|all")
set(_detected_archs "")
set(_detected "")
# Ask nvidia-smi only when its answer is used: CUDA not turned off and no architectures given.
if(CMAKE_CUDA_COMPILER AND _req_archs STREQUAL "" AND (_req_enable STREQUAL "" OR _req_enable))
  int8attn_detect_gpu_archs(_detected_archs _detected)
endif()

if(_req_enable STREQUAL "")
  if(NOT CMAKE_CUDA_COMPILER)
    set(_enable OFF)
    set(_why "no CUDA compiler found: put nvcc on PATH (e.g. /usr/local/cuda/bin) or set CMAKE_CUDA_COMPILER")
  elseif(NOT _req_archs STREQUAL "")
    set(_enable ON)
    set(_why "INT8ATTN_CUDA_ARCHS=${_req_archs} was given")
  elseif(_detected_archs)
    set(_enable ON)
    set(_why "nvcc and ${_detected}")
  else()
    set(_enable OFF)
    string(CONCAT _why "nvcc found, but ${_detected}: the CPU backend only, since compiling "
                       "the CUDA kernels takes minutes per architecture; to build them anyway: "
                       "${_force_hint}")
  endif()
elseif(_req_enable)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "int8attn: INT8ATTN_ENABLE_CUDA=${_req_enable} but no CUDA compiler was "
                        "found; put nvcc on PATH (or set CMAKE_CUDA_COMPILER), or configure "
                        "with -DINT8ATTN_ENABLE_CUDA=OFF")
  endif()
  set(_enable ON)
  set(_why "INT8ATTN_ENABLE_CUDA=${_req_enable}")
else()
  set(_enable OFF)
  set(_why "INT8ATTN_ENABLE_CUDA=${_req_enable}")
endif()

set(_archs "")
if(_enable)
  if(NOT _req_archs STREQUAL "" AND NOT _req_enable STREQUAL "")
    string(APPEND _why "; INT8ATTN_CUDA_ARCHS=${_req_archs}")
  endif()
  if(_req_archs STREQUAL "all")
    set(_archs ${INT8ATTN_ALL_CUDA_ARCHS})
  elseif(NOT _req_archs STREQUAL "")
    set(_archs ${_req_archs})
  elseif(_detected_archs)
    set(_archs ${_detected_archs})
    string(APPEND _why "; architectures of the GPUs present")
  else()
    set(_archs ${INT8ATTN_ALL_CUDA_ARCHS})
    string(APPEND _why "; no GPU to choose for, so every architecture "
                       "(-DINT8ATTN_CUDA_ARCHS=90a builds one)")
  endif()
  foreach(_a IN LISTS _archs)
    if(NOT _a IN_LIST INT8ATTN_ALL_CUDA_ARCHS)
      message(FATAL_ERROR "int8attn: INT8ATTN_CUDA_ARCHS: '${_a}' is not one of "
                          "${INT8ATTN_ALL_CUDA_ARCHS} (or 'all')")
    endif()
  endforeach()
  list(JOIN _archs ";" _arch_text)
  message(STATUS "int8attn: CUDA backend ON for ${_arch_text} (${_why})")
else()
  message(STATUS "int8attn: CUDA backend OFF (${_why})")
endif()

# The resolved values, for the rest of the project (cuda/sources.cmake, tools/, tests/).
set(INT8ATTN_ENABLE_CUDA ${_enable})
set(INT8ATTN_CUDA_ARCHS "${_archs}")
