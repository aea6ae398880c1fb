# The CUDA backend, included from the top-level CMakeLists.txt when INT8ATTN_ENABLE_CUDA is ON.
# Layout: cuda/common holds what every architecture's kernels share (device helpers, the
# generic mma.sync attention kernel template, K/V preparation, combine, block mask, quantize)
# and cuda/host the backend's host code (planning, dispatch, K/V cache); both are compiled for
# every architecture in INT8ATTN_CUDA_ARCHS. cuda/smXX/*.cu hold one architecture's kernel
# instantiations (and Hopper's own kernels in cuda/sm90) and compile only for it. Device code
# includes only include/, src/common/ and cuda/{common,smXX}/, never host code.
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
option(INT8ATTN_CUDA_PTXAS_VERBOSE "Print ptxas register/spill reports" OFF)
# Profiling builds: per-CTA phase clocks in the sm90a attention kernel (cuda/sm90/cta_clocks.cuh,
# read by bench/cta_phases.py). Set on that one file, so toggling it rebuilds one object.
option(INT8ATTN_CTA_CLOCKS "Record per-CTA phase clocks in the sm90a attention kernel" OFF)

set(_int8attn_all_gencode "")
foreach(arch ${INT8ATTN_CUDA_ARCHS})
  if(NOT arch MATCHES "^(80|89|90a)$")
    message(FATAL_ERROR "INT8ATTN_CUDA_ARCHS: '${arch}' is not one of 80, 89, 90a")
  endif()
  list(APPEND _int8attn_all_gencode "-gencode=arch=compute_${arch},code=sm_${arch}")
endforeach()

file(GLOB _int8attn_cuda_common CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/cuda/common/*.cu ${PROJECT_SOURCE_DIR}/cuda/host/*.cu)
target_sources(int8attn PRIVATE ${_int8attn_cuda_common})
set_source_files_properties(${_int8attn_cuda_common} PROPERTIES
  COMPILE_OPTIONS "${_int8attn_all_gencode}")

foreach(arch ${INT8ATTN_CUDA_ARCHS})
  string(REGEX REPLACE "a$" "" num ${arch})
  file(GLOB _arch_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/cuda/sm${num}/*.cu)
  target_sources(int8attn PRIVATE ${_arch_sources})
  set_source_files_properties(${_arch_sources} PROPERTIES
    COMPILE_OPTIONS "-gencode=arch=compute_${arch},code=sm_${arch}")
  target_compile_definitions(int8attn PRIVATE INT8ATTN_HAVE_SM${num})
endforeach()
if(INT8ATTN_CTA_CLOCKS)
  set_property(SOURCE ${PROJECT_SOURCE_DIR}/cuda/sm90/attention_sm90_wgmma.cu APPEND PROPERTY
    COMPILE_DEFINITIONS INT8ATTN_CTA_CLOCKS=1)
endif()

set_target_properties(int8attn PROPERTIES CUDA_ARCHITECTURES OFF)
target_compile_options(int8attn PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-fvisibility=hidden>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${INT8ATTN_CUDA_PTXAS_VERBOSE}>>:-Xptxas=-v>)
target_link_libraries(int8attn PRIVATE CUDA::cudart_static)
target_compile_definitions(int8attn PRIVATE INT8ATTN_WITH_CUDA)
