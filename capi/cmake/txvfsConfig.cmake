# txvfs's CMake package, installed by `make install` as PREFIX/lib/cmake/txvfs/txvfsConfig.cmake.
#   find_package(txvfs 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE txvfs::txvfs)          # libtxvfs.so (C API + txvfs.hpp)
#   target_link_libraries(app PRIVATE txvfs::txvfs_static)   # libtxvfs.a and its system libraries
# Relocatable: every path is found from this file's own location (PREFIX/lib/cmake/txvfs).
get_filename_component(_txvfs_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

if(NOT TARGET txvfs::txvfs)
  add_library(txvfs::txvfs SHARED IMPORTED)
  set_target_properties(txvfs::txvfs PROPERTIES
    IMPORTED_LOCATION "${_txvfs_prefix}/lib/libtxvfs.so.${txvfs_VERSION_MAJOR}"
    IMPORTED_SONAME "libtxvfs.so.${txvfs_VERSION_MAJOR}"
    INTERFACE_INCLUDE_DIRECTORIES "${_txvfs_prefix}/include")
endif()

if(NOT TARGET txvfs::txvfs_static)
  # RocksDB inside libtxvfs.a needs the C++ runtime (rustc --print native-static-libs).
  find_package(Threads REQUIRED)
  add_library(txvfs::txvfs_static STATIC IMPORTED)
  set_target_properties(txvfs::txvfs_static PROPERTIES
    IMPORTED_LOCATION "${_txvfs_prefix}/lib/libtxvfs.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_txvfs_prefix}/include"
    INTERFACE_LINK_LIBRARIES "stdc++;gcc_s;util;rt;Threads::Threads;m;dl")
endif()

foreach(_txvfs_file "lib/libtxvfs.so.${txvfs_VERSION_MAJOR}" "lib/libtxvfs.a" "include/txvfs.h")
  if(NOT EXISTS "${_txvfs_prefix}/${_txvfs_file}")
    set(txvfs_FOUND FALSE)
    set(txvfs_NOT_FOUND_MESSAGE "txvfs: ${_txvfs_prefix}/${_txvfs_file} is missing (incomplete install?)")
  endif()
endforeach()
unset(_txvfs_file)
unset(_txvfs_prefix)
