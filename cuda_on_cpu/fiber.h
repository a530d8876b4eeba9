// Fibers: contexts with stacks of their own that run on the host thread that resumes them,
// switched by a small assembly routine that saves only what the calling convention asks a callee
// to keep. (glibc's swapcontext also saves and restores the signal mask, one system call per
// switch: that was most of a kernel's time.) Each stack is mmap'd with a PROT_NONE guard page
// below it, so an overflow faults at once instead of overwriting a neighbour; every switch is
// announced to AddressSanitizer, which otherwise takes a fiber's frames for a corrupted stack.
// x86-64 only.
#pragma once

#include <cstddef>

namespace cuda_on_cpu {

class Fiber {
 public:
  using Entry = void (*)(void* argument);

  Fiber();
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // The next resume starts entry(argument) at the top of the stack; entry ends with finish().
  void prepare(Entry entry, void* argument);
  // Called by the scheduler: runs the fiber until it suspends or finishes.
  void resume();
  // Called on the fiber: back to the scheduler; the next resume continues after this call.
  void suspend();
  // Called on the fiber as its last act: back to the scheduler for good.
  [[noreturn]] void finish();

 private:
  static void start(Fiber* fiber);

  char* mapping_ = nullptr;  // guard page, then the stack
  void* fiber_sp_ = nullptr;
  void* scheduler_sp_ = nullptr;
  Entry entry_ = nullptr;
  void* argument_ = nullptr;
  // AddressSanitizer's record of the fiber's fake stack and of the scheduler's stack.
  void* fake_stack_ = nullptr;
  const void* scheduler_stack_bottom_ = nullptr;
  size_t scheduler_stack_size_ = 0;
};

}  // namespace cuda_on_cpu
