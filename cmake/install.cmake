# Install rules: library, header, CMake package (find_package(int8attn)) and pkg-config file.

if(SKBUILD)
  # Python wheel (scikit-build-core, bindings/python): only the shared library, installed inside
  # the `int8attn` package directory, found by ctypes next to __init__.py. No versioned symlinks
  # (wheels cannot hold them) and an $ORIGIN rpath so libraries shipped beside it are found.
  set_property(TARGET int8attn PROPERTY VERSION)
  set_property(TARGET int8attn PROPERTY SOVERSION)
  set_target_properties(int8attn PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS int8attn
    LIBRARY DESTINATION int8attn
    RUNTIME DESTINATION int8attn
    ARCHIVE DESTINATION int8attn/lib
    PUBLIC_HEADER DESTINATION int8attn/include)
  return()
endif()

include(CMakePackageConfigHelpers)

install(TARGETS int8attn EXPORT int8attnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT int8attnTargets NAMESPACE int8attn::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/int8attn)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/int8attnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/int8attnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/int8attn)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/int8attnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/int8attnConfig.cmake
              ${PROJECT_BINARY_DIR}/int8attnConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/int8attn)
# The .pc file finds its prefix from its own location (${pcfiledir}), so an installed tree can be
# moved or unpacked anywhere; an absolute CMAKE_INSTALL_LIBDIR keeps the absolute prefix.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(INT8ATTN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _int8attn_pc_up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" _int8attn_pc_up "${_int8attn_pc_up}")
  set(INT8ATTN_PC_PREFIX "\${pcfiledir}/${_int8attn_pc_up}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/int8attn.pc.in ${PROJECT_BINARY_DIR}/int8attn.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/int8attn.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
