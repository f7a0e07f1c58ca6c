# Writes OUT, a C++ file that defines the report viewer's assets as string
# views of raw string literals: cmake -DJS=... -DCSS=... -DOUT=... -P embed.cmake
file(READ "${JS}" js)
file(READ "${CSS}" css)
foreach(text IN ITEMS "${js}" "${css}")
  string(FIND "${text}" ")chorus_asset\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "an asset contains the raw string's delimiter )chorus_asset\"")
  endif()
endforeach()
file(WRITE "${OUT}.tmp"
     "// Generated from src/report/assets by embed.cmake; do not edit.\n"
     "#include \"report/assets.h\"\n\nnamespace chorus::report {\n\n"
     "const std::string_view kReportJs = R\"chorus_asset(${js})chorus_asset\";\n\n"
     "const std::string_view kReportCss = R\"chorus_asset(${css})chorus_asset\";\n\n"
     "}  // namespace chorus::report\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
