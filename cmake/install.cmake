# `cmake --install`: the `lcsim` binary, the libraries and their headers, the shipped profiles, and a CMake package
# (find_package(lcsim)) whose targets are lcsim::base, lcsim::model, lcsim::policies, lcsim::program, lcsim::formats,
# lcsim::engine, lcsim::studies, lcsim::simulation and lcsim::cli.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LCSIM_INSTALL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/lcsim)
set(LCSIM_INSTALL_INCLUDE_DIR ${CMAKE_INSTALL_INCLUDEDIR}/lcsim)
set(LCSIM_INSTALL_PROFILES_DIR ${CMAKE_INSTALL_DATADIR}/lcsim/profiles)

foreach(layer base model policies program formats engine studies simulation cli)
  set_target_properties(lcsim_${layer} PROPERTIES EXPORT_NAME ${layer})
endforeach()
install(TARGETS lcsim lcsim_base lcsim_model lcsim_policies lcsim_program lcsim_formats lcsim_engine lcsim_studies
                lcsim_simulation lcsim_cli lcsim_warnings
        EXPORT lcsimTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY base model policies program formats engine studies cli DESTINATION ${LCSIM_INSTALL_INCLUDE_DIR} FILES_MATCHING PATTERN "*.hpp")
install(DIRECTORY calibrate/profiles/ DESTINATION ${LCSIM_INSTALL_PROFILES_DIR} FILES_MATCHING PATTERN "*.json")
install(EXPORT lcsimTargets NAMESPACE lcsim:: DESTINATION ${LCSIM_INSTALL_CMAKE_DIR})

configure_package_config_file(cmake/lcsimConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/lcsimConfig.cmake
                              INSTALL_DESTINATION ${LCSIM_INSTALL_CMAKE_DIR} PATH_VARS LCSIM_INSTALL_PROFILES_DIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/lcsimConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/lcsimConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/lcsimConfigVersion.cmake
        DESTINATION ${LCSIM_INSTALL_CMAKE_DIR})
