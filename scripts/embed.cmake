# Turns every remote/*.sh into a C string (name "remote_<file>_sh") in one generated file, so the
# binary carries exactly the fragments the tests check with `bash -n`.
file(GLOB files ${DIR}/*.sh)
list(FILTER files EXCLUDE REGEX "provision") # runs by hand on a new VM, not per call
list(SORT files)
set(out "/* generated from remote/ by scripts/embed.cmake: do not edit */\n#include <stddef.h>\n")
foreach(f ${files})
  get_filename_component(base ${f} NAME_WE)
  string(REPLACE "-" "_" base ${base})
  file(READ ${f} hex HEX)
  string(LENGTH "${hex}" hexlen)
  math(EXPR n "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND out "const unsigned char rx_remote_${base}[] = {${bytes}0x00};\n")
  string(APPEND out "const size_t rx_remote_${base}_len = ${n};\n")
endforeach()
file(WRITE ${OUT} "${out}")
