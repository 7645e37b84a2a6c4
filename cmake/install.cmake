# make install: headers, libdprobe.so, dprobe.pc and a CMake package config.
include(CMakePackageConfigHelpers)
install(TARGETS dprobe EXPORT dprobeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/dprobe DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT dprobeTargets NAMESPACE dprobe:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dprobe)
configure_package_config_file(cmake/dprobeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/dprobeConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dprobe)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dprobeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dprobeConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/dprobeConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dprobe)
# The .pc file goes to <prefix>/<libdir>/pkgconfig; its prefix is the way back from there.
file(RELATIVE_PATH DPROBE_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(cmake/dprobe.pc.in ${CMAKE_CURRENT_BINARY_DIR}/dprobe.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dprobe.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# gdb's frame unwinder for dprobe, for `source` by hand (libdprobe.so carries it too, in its
# .debug_gdb_scripts section, which gdb auto-loads where its safe-path allows).
install(FILES scripts/gdb/dprobe-gdb.py DESTINATION ${CMAKE_INSTALL_DATADIR}/dprobe/gdb)
