// The C++ header alone, as C++17 with -Wall -Wextra -Werror -pedantic.
#include "txvfs.hpp"

int header_hpp() { return sizeof(txvfs::error) > 0; }
