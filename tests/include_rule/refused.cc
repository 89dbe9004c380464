// Compiled with the sim module's include view only: sim and server are siblings, so this
// include must not resolve (tests/CMakeLists.txt expects the compiler to say so).
#include "server/server.h"
