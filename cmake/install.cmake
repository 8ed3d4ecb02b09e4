# What `cmake --install` puts in place, and the .deb CPack makes of it (packaging, issue #15).
# Layout after curl and libuv: bin/rexec (the light front) and libexec/rexec/rexec-full (every
# command; docs/architecture.md, "Linking the rexec executable"), lib/librexec.so.N (+ .so, .a), include/rexec.h and
# include/rexec/version.h, lib/pkgconfig/rexec.pc, lib/cmake/rexec/ (find_package(rexec)), man
# pages, bash completion, share/doc/rexec.
include(CMakePackageConfigHelpers)

install(TARGETS rexec RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# the full program the light front (bin/rexec) execs for every command it does not run itself
install(TARGETS rexec_full RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/rexec)
install(TARGETS rexec_shared rexec_static EXPORT rexecTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/rexec.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_BINARY_DIR}/include/rexec/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rexec)

# rexec.pc: written at install time, so `cmake --install --prefix P` and CPack get their own
# prefix in it (the configure-time CMAKE_INSTALL_PREFIX may be another). One file per
# destination, so concurrent installs of this build (a test and cpack) cannot swap contents.
set(REXEC_PC_IN ${CMAKE_SOURCE_DIR}/cmake/rexec.pc.in)
install(CODE "
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  set(REXEC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(REXEC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(REXEC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  string(MD5 _rexec_pc_tag \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}\")
  set(_rexec_pc \"${CMAKE_BINARY_DIR}/pkgconfig/\${_rexec_pc_tag}/rexec.pc\")
  configure_file(\"${REXEC_PC_IN}\" \"\${_rexec_pc}\" @ONLY)
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\"
       TYPE FILE FILES \"\${_rexec_pc}\")
")

# find_package(rexec): imported targets rexec::rexec (shared) and rexec::rexec_static.
set(REXEC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rexec)
install(EXPORT rexecTargets NAMESPACE rexec:: DESTINATION ${REXEC_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/rexecConfig.cmake.in
  ${CMAKE_BINARY_DIR}/rexecConfig.cmake INSTALL_DESTINATION ${REXEC_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/rexecConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/rexecConfig.cmake ${CMAKE_BINARY_DIR}/rexecConfigVersion.cmake
        DESTINATION ${REXEC_CMAKE_DIR})

# Man pages (man/, checked by tests/install/t_man.sh), bash completion, documentation.
# Man pages are installed gzipped (-n: no name or time stamp, so the .deb is reproducible).
set(REXEC_MANPAGES rexec.1 rexec.json.5)
set(REXEC_MAN_GZ)
foreach(page ${REXEC_MANPAGES})
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/man/${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_SOURCE_DIR}/man/${page} ${CMAKE_BINARY_DIR}/man/${page}
    COMMAND gzip -9nf ${CMAKE_BINARY_DIR}/man/${page}
    DEPENDS ${CMAKE_SOURCE_DIR}/man/${page} VERBATIM)
  list(APPEND REXEC_MAN_GZ ${CMAKE_BINARY_DIR}/man/${page}.gz)
  string(REGEX REPLACE ".*\\.([0-9])$" "\\1" section ${page})
  install(FILES ${CMAKE_BINARY_DIR}/man/${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()
add_custom_target(rexec_man ALL DEPENDS ${REXEC_MAN_GZ})
install(FILES ${CMAKE_SOURCE_DIR}/completions/rexec
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/LICENSE
              ${CMAKE_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

# ---- CPack: one .deb (cpack -G DEB in the build directory) ------------------------------------
# Dependencies come from dpkg-shlibdeps on the installed ELF files, so they are Debian package
# names (libssh2-1, libuv1, libcjson1, libssl3, libc6). A test build (ASan/UBSan) also depends on
# libasan/libubsan: make packages from a Release build.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rexec)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "run operator-approved actions on tool VMs over SSH")
set(CPACK_PACKAGE_DESCRIPTION "rexec runs operator-approved actions on tool VMs over SSH: a \
risk gate, redacted output, a hash-chained audit log and evidence files. The package has the \
rexec command, the librexec library (shared and static), its header, pkg-config and CMake files.")
set(CPACK_PACKAGE_CONTACT "rexec maintainers <rexec-maintainers@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openssh-client, python3")  # python3: the Python client, approvals watch|web
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "bash-completion")
include(CPack)

# The Python client of `rexec serve` (docs/python-client.md), pure Python, where Debian's python3
# looks for it: /usr/lib/python3/dist-packages for the .deb (prefix /usr, the place of Debian's
# own python3-* packages), /usr/local/lib/python3.X/dist-packages for `cmake --install` to
# /usr/local (Debian's python3 does not search /usr/local/lib/python3/dist-packages). X is the
# version of the system's python3, asked at configure time; REXEC_PYTHON_INSTALL_DIR overrides both.
set(REXEC_PYTHON_INSTALL_DIR "" CACHE STRING "where cmake --install puts rexec_client (relative to the prefix; empty: Debian's place)")
set(REXEC_PYTHON_MINOR "")
find_program(REXEC_SYSTEM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(REXEC_SYSTEM_PYTHON)
  execute_process(COMMAND ${REXEC_SYSTEM_PYTHON} -c "import sys; print('%d.%d' % sys.version_info[:2])"
                  OUTPUT_VARIABLE REXEC_PYTHON_MINOR OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
# Decided at install time: `cmake --install --prefix P` and CPack (prefix /usr) differ.
install(CODE "
  set(_rexec_py \"${REXEC_PYTHON_INSTALL_DIR}\")
  if(_rexec_py STREQUAL \"\")
    if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\" OR \"${REXEC_PYTHON_MINOR}\" STREQUAL \"\")
      set(_rexec_py lib/python3/dist-packages)
    else()
      set(_rexec_py lib/python${REXEC_PYTHON_MINOR}/dist-packages)
    endif()
  endif()
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/\${_rexec_py}\" TYPE DIRECTORY
       FILES \"${CMAKE_SOURCE_DIR}/python/rexec_client\"
       FILES_MATCHING PATTERN \"*.py\" PATTERN \"*.js\" PATTERN \"*.css\"
       PATTERN \"__pycache__\" EXCLUDE)
")

# After an install into the running system (no DESTDIR) as root, the dynamic linker's cache
# learns the new librexec.so.0 (embedders link it; bin/rexec does not need it). A .deb runs
# ldconfig through its trigger instead (tests/install/t_deb.sh). Without root there is no cache
# to update: the library is found through LD_LIBRARY_PATH or an rpath.
install(CODE "
  execute_process(COMMAND id -u OUTPUT_VARIABLE _rexec_uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(\"\$ENV{DESTDIR}\" STREQUAL \"\" AND _rexec_uid STREQUAL \"0\")
    execute_process(COMMAND ldconfig RESULT_VARIABLE _rexec_ldconfig)
    if(NOT _rexec_ldconfig EQUAL 0)
      message(WARNING \"ldconfig failed (\${_rexec_ldconfig}): run it by hand\")
    endif()
  endif()
")
