/*
 * common.h — helpers shared by the end-to-end test programs.
 *
 * The programs must keep their shape under -O1/-O2 so that the stacks
 * heaptrail reports can be checked by function name and line:
 *
 *  - NOINLINE keeps a leaking function a real frame.  GCC's noipa also
 *    stops cloning (no "leak_one.constprop.0") and interprocedural
 *    shortcuts, so the symbol name is exactly the source name.
 *  - KEEP(p) tells the optimizer that p escapes, so an allocation whose
 *    result is otherwise unused is not deleted, without storing p anywhere
 *    a leak scan could find it: the block stays "definitely lost".
 *  - A leaking function always uses the block after the allocator call,
 *    so the call is never a tail call (which would drop the frame).
 *
 * Every allocation site that a test checks carries a marker comment
 * "@site NAME" on the line of the allocator call; the runner reads the
 * markers to know the expected function and line.
 */
#ifndef HEAPTRAIL_E2E_COMMON_H
#define HEAPTRAIL_E2E_COMMON_H

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noipa))
#endif

#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

#endif
