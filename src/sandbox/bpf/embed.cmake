# Writes the BPF object IN as a C array in OUT (sandrun_socket_cap_object[_size]).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" len)
math(EXPR size "${len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}" "// Generated from ${IN}; do not edit.\n"
     "extern \"C\" const unsigned char sandrun_socket_cap_object[] = {${bytes}};\n"
     "extern \"C\" const unsigned long sandrun_socket_cap_object_size = ${size};\n")
