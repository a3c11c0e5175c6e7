/*
 * demangle — C++ and Rust symbol names through libiberty.
 *
 * On Debian 12 (libiberty 20230104) one cplus_demangle call with DMGL_AUTO
 * covers all three schemes: it tries the Rust demangler first (legacy
 * _ZN...17h<hash>E and v0 _R...), then the GNU v3 C++ one. Without
 * DMGL_VERBOSE the legacy ::h<hash> suffix and v0 crate disambiguators
 * are left out; DMGL_RUST alone rejects plain C++ and DMGL_GNU_V3 alone
 * rejects v0 and keeps the hash, so neither is enough by itself.
 */
#include "symbolize/symbolize.h"

#include <libiberty/demangle.h>

char *sym_demangle(const char *name)
{
	/* Only names that look mangled: DMGL_AUTO would also accept other
	 * schemes (GNAT, D) that a C symbol can happen to resemble. */
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
}
