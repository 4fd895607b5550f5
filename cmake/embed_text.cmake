# Writes a C++ file defining `std::string_view NAME()` that returns the text of file IN, as a raw
# string literal (the text must not contain `)kvr_embedded"`). Run at build time:
#   cmake -DIN=page.html -DOUT=page.cpp -DNAME=kvr::status_page_html -DHEADER=actors/http/status_page.hpp -P embed_text.cmake
file(READ "${IN}" text)
string(FIND "${text}" ")kvr_embedded\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )kvr_embedded\"")
endif()
string(REGEX REPLACE "::[^:]+$" "" namespace "${NAME}")
string(REGEX REPLACE "^.*::" "" function "${NAME}")
file(WRITE "${OUT}" "// Generated from ${IN} by cmake/embed_text.cmake: edit that file instead.\n"
                    "#include \"${HEADER}\"\n\nnamespace ${namespace} {\n\n"
                    "std::string_view ${function}() {\n  static constexpr std::string_view text = R\"kvr_embedded(${text})kvr_embedded\";\n"
                    "  return text;\n}\n\n}  // namespace ${namespace}\n")
