// Compiled with the sim module's include view only: sim may include sched (tests/CMakeLists.txt).
#include "sched/framework/job.h"
