// prctl is variadic, so Swift cannot call it directly: this wraps the one call the CLI makes.
#ifndef LOCALSTORE_CPROCESSHYGIENE_H
#define LOCALSTORE_CPROCESSHYGIENE_H
#ifdef __linux__
#include <sys/prctl.h>
/// prctl(PR_SET_DUMPABLE, 0): no core dump, no ptrace attach or /proc/<pid>/mem by other non-root processes.
static inline int localstore_set_not_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
#else
static inline int localstore_set_not_dumpable(void) { return 0; }
#endif
#endif
