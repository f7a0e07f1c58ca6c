# What `cmake --install` puts in place (docs/install.md): libchorus.so, the
# public headers, the `chorus` command, a CMake package and a pkg-config
# file; the Python package where it was built (python/CMakeLists.txt); and
# CPack's Debian package of the same tree.
include(CMakePackageConfigHelpers)

install(TARGETS chorus_shared EXPORT ChorusTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(TARGETS chorus RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/chorus DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev)

set(chorus_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)
install(EXPORT ChorusTargets NAMESPACE Chorus:: DESTINATION ${chorus_cmake_dir} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ChorusConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/ChorusConfig.cmake
                              INSTALL_DESTINATION ${chorus_cmake_dir}
                              PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ChorusConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ChorusConfig.cmake ${PROJECT_BINARY_DIR}/ChorusConfigVersion.cmake
        DESTINATION ${chorus_cmake_dir} COMPONENT dev)

# pkg-config: ${pcfiledir} up to the prefix, so a copied or DESTDIR tree works.
set(chorus_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH CHORUS_PC_PREFIX_FROM_PCDIR ${CMAKE_INSTALL_PREFIX}/${chorus_pc_dir}
     ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" CHORUS_PC_PREFIX_FROM_PCDIR "${CHORUS_PC_PREFIX_FROM_PCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/chorus.pc.in ${PROJECT_BINARY_DIR}/chorus.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/chorus.pc DESTINATION ${chorus_pc_dir} COMPONENT dev)

# `cpack -G DEB` in a tree configured with -DCMAKE_INSTALL_PREFIX=/usr
# (scripts/deb_check.sh): one package, its library dependencies found by
# dpkg-shlibdeps.
set(CPACK_PACKAGE_NAME chorus)
set(CPACK_PACKAGE_VENDOR "Chorus developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Programmable collective communication: verify, simulate, synthesize and run algorithms")
set(CPACK_PACKAGE_CONTACT "Chorus developers <chorus@localhost>")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
include(CPack)
