# Doxygen's input filter (docs/Doxyfile.in): tapegrad's headers comment in plain //, which
# Doxygen would skip. A comment line becomes a /// doc line, a comment after a declaration a
# ///< one, and <tokens> in comments (<eos>, <pad>) are escaped so they are not read as HTML.
s|^\( *\)// |\1/// |
s|^\( *\)//$|\1///|
s|\([;{,]\) *// |\1 ///< |
/\/\/\//s|<\([a-z_0-9]*\)>|\\<\1\\>|g
