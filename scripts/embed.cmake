# Turns every remote/*.sh into a C string (name "rx_remote_<file>") in one generated file, so the
# binary carries exactly the fragments the tests check with `bash -n`.
# Comment lines and indentation are dropped on the way: bash reads a script from a pipe one byte
# at a time, so every byte sent costs a read(2) on the VM for every call.
file(GLOB files ${DIR}/*.sh)
list(FILTER files EXCLUDE REGEX "provision") # runs by hand on a new VM, not per call
list(SORT files)
set(out "/* generated from remote/ by scripts/embed.cmake: do not edit */\n#include <stddef.h>\n")
foreach(f ${files})
  get_filename_component(base ${f} NAME_WE)
  string(REPLACE "-" "_" base ${base})
  file(READ ${f} text)
  string(REGEX REPLACE "^[ \t]*#[^\n]*\n" "" text "${text}")
  string(REGEX REPLACE "\n[ \t]*#[^\n]*" "" text "${text}")
  string(REGEX REPLACE "\n[ \t]+" "\n" text "${text}")
  string(REGEX REPLACE "\n\n+" "\n" text "${text}")
  file(WRITE ${OUT}.tmp "${text}")
  file(READ ${OUT}.tmp hex HEX)
  file(REMOVE ${OUT}.tmp)
  string(LENGTH "${hex}" hexlen)
  math(EXPR n "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND out "const unsigned char rx_remote_${base}[] = {${bytes}0x00};\n")
  string(APPEND out "const size_t rx_remote_${base}_len = ${n};\n")
endforeach()
file(WRITE ${OUT} "${out}")
