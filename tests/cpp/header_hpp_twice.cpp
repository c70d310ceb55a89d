// The C++ header included twice (and after the C header).
#include "txvfs.h"
#include "txvfs.hpp"
#include "txvfs.hpp"

int header_hpp_twice() { return sizeof(txvfs::store) > 0; }
