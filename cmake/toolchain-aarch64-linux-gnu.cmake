# Cross-compiling for 64-bit Arm Linux (NEON / SVE targets of Highway) with Debian's
# g++-aarch64-linux-gnu and the :arm64 library packages (scripts/install_deps.sh --arm64).
# The binaries run here under qemu-user (scripts/test_arm64.sh).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# The :arm64 multiarch packages install their own glibc under /lib/aarch64-linux-gnu; running
# with the cross toolchain's copy (-L /usr/aarch64-linux-gnu) mixes two builds and hangs in
# pthread_create, so the emulator takes the root file system as its prefix.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/)
