// The C header compiled as C++ (extern "C" guards), included twice.
#include "txvfs.h"
#include "txvfs.h"

int header_c_as_cpp() { return txvfs_strerror(0) != nullptr; }
