# REXEC_STATIC_DEPS (#30): the rexec executable with libssh2, libcrypto, libuv and zlib linked
# in from their static archives; cJSON, libm and libc stay shared, and librexec.so/.a are the
# same either way. Why: a short-lived `rexec --socket S run ...` spends most of its own time
# starting: the dynamic loader maps libcrypto (4.6 MB) and libssh2 and applies ~18,000
# relocations, ~0.5 ms a process (docs/PERFORMANCE.md). The price: a security fix in OpenSSL,
# libssh2, libuv or zlib reaches rexec only when rexec is rebuilt, so it is OFF by default and
# the Debian package (CPack) is built without it (docs/architecture.md, "Linking").
#
# rexec_core_static_deps: the core objects as a static library whose users link those archives.
# It is defined whenever the four archives are found (the test build links a second executable
# with it); REXEC_STATIC_DEPS=ON without them is an error that names the missing one.
option(REXEC_STATIC_DEPS "link the rexec executable with static libssh2, libcrypto, libuv, zlib" OFF)

set(_rx_static_found TRUE)
foreach(dep SSH2 CRYPTO UV Z)
  # Debian ships libuv's archive as libuv_a.a; upstream libuv >= 1.45 as libuv.a
  set(_names_SSH2 libssh2.a)
  set(_names_CRYPTO libcrypto.a)
  set(_names_UV libuv_a.a libuv.a)
  set(_names_Z libz.a)
  find_library(REXEC_${dep}_ARCHIVE NAMES ${_names_${dep}}
               HINTS ${SSH2_LIBRARY_DIRS} ${CRYPTO_LIBRARY_DIRS} ${UV_LIBRARY_DIRS})
  if(NOT REXEC_${dep}_ARCHIVE)
    set(_rx_static_found FALSE)
    if(REXEC_STATIC_DEPS)
      message(FATAL_ERROR "REXEC_STATIC_DEPS: no static archive (${_names_${dep}}) found; "
                          "install the -dev package that ships it, or configure without it")
    endif()
  endif()
endforeach()

if(_rx_static_found)
  find_package(Threads REQUIRED)
  add_library(rexec_core_static_deps STATIC $<TARGET_OBJECTS:rexec_objects>)
  target_include_directories(rexec_core_static_deps PUBLIC ${CORE_INCLUDES} ${SSH2_INCLUDE_DIRS}
                             ${UV_INCLUDE_DIRS} ${CRYPTO_INCLUDE_DIRS})
  # libssh2 needs libcrypto and zlib, libcrypto needs libdl and threads: in that order
  target_link_libraries(rexec_core_static_deps PUBLIC ${REXEC_SSH2_ARCHIVE} ${REXEC_UV_ARCHIVE}
                        ${REXEC_CRYPTO_ARCHIVE} ${REXEC_Z_ARCHIVE} PkgConfig::CJSON
                        Threads::Threads ${CMAKE_DL_LIBS} m)
endif()
