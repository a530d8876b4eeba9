// Fibers: see fiber.h.
#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define CUDA_ON_CPU_ASAN 1
#endif

#if !defined(__x86_64__)
#error "cuda_on_cpu's fibers switch contexts in x86-64 assembly"
#endif

// switch_context(save, load): pushes the callee-saved registers on the current stack, stores the
// stack pointer in *save, loads `load` as the stack pointer and pops what an earlier switch
// pushed there. The SSE and x87 control words, which the calling convention also asks a callee to
// keep, are left alone: every fiber runs on the thread's floating-point environment, and no kernel
// changes it. A new fiber's stack is prepared to "pop" into fiber_trampoline, which calls r13(r12)
// with the stack aligned as a call requires.
extern "C" void cuda_on_cpu_switch_context(void** save, void* load);
extern "C" void cuda_on_cpu_fiber_trampoline();

asm(R"(
  .text
  .p2align 4
  .globl cuda_on_cpu_switch_context
  .hidden cuda_on_cpu_switch_context
  .type cuda_on_cpu_switch_context, @function
cuda_on_cpu_switch_context:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuda_on_cpu_switch_context, .-cuda_on_cpu_switch_context

  .p2align 4
  .globl cuda_on_cpu_fiber_trampoline
  .hidden cuda_on_cpu_fiber_trampoline
  .type cuda_on_cpu_fiber_trampoline, @function
cuda_on_cpu_fiber_trampoline:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  callq *%r13
  ud2
  .cfi_endproc
  .size cuda_on_cpu_fiber_trampoline, .-cuda_on_cpu_fiber_trampoline
)");

namespace cuda_on_cpu {

namespace {

// Room for a kernel's arrays in registers (a few KiB) many times over, AddressSanitizer's red
// zones included; only the pages a fiber touches take memory.
constexpr size_t kStackBytes = size_t{256} << 10;

size_t page_bytes() {
  static const auto bytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "cuda_on_cpu: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

// The frame switch_context pops, lowest address first.
struct InitialFrame {
  void* r15;
  void* r14;
  void* r13;  // the function the trampoline calls
  void* r12;  // its argument
  void* rbx;
  void* rbp;
  void* return_address;  // the trampoline
};
static_assert(sizeof(InitialFrame) == 56);

}  // namespace

Fiber::Fiber() {
  void* mapping = mmap(nullptr, page_bytes() + kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
  if (mapping == MAP_FAILED) fail("mmap of a fiber stack");
  mapping_ = static_cast<char*>(mapping);
  if (mprotect(mapping_, page_bytes(), PROT_NONE) != 0) fail("mprotect of a fiber stack's guard page");
}

Fiber::~Fiber() { munmap(mapping_, page_bytes() + kStackBytes); }

void Fiber::prepare(Entry entry, void* argument) {
  entry_ = entry;
  argument_ = argument;
  // The trampoline's call needs a 16-byte aligned stack pointer; after the frame is popped it
  // is the frame's end.
  char* top = mapping_ + page_bytes() + kStackBytes - 16;
  auto* frame = reinterpret_cast<InitialFrame*>(top - sizeof(InitialFrame));
  std::memset(frame, 0, sizeof(InitialFrame));
  frame->r13 = reinterpret_cast<void*>(&Fiber::start);
  frame->r12 = this;
  frame->return_address = reinterpret_cast<void*>(&cuda_on_cpu_fiber_trampoline);
  fiber_sp_ = frame;
}

void Fiber::start(Fiber* fiber) {
#ifdef CUDA_ON_CPU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &fiber->scheduler_stack_bottom_, &fiber->scheduler_stack_size_);
#endif
  fiber->entry_(fiber->argument_);
  fiber->finish();
}

void Fiber::resume() {
#ifdef CUDA_ON_CPU_ASAN
  void* scheduler_fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&scheduler_fake_stack, mapping_ + page_bytes(), kStackBytes);
#endif
  cuda_on_cpu_switch_context(&scheduler_sp_, fiber_sp_);
#ifdef CUDA_ON_CPU_ASAN
  __sanitizer_finish_switch_fiber(scheduler_fake_stack, nullptr, nullptr);
#endif
}

void Fiber::suspend() {
#ifdef CUDA_ON_CPU_ASAN
  __sanitizer_start_switch_fiber(&fake_stack_, scheduler_stack_bottom_, scheduler_stack_size_);
#endif
  cuda_on_cpu_switch_context(&fiber_sp_, scheduler_sp_);
#ifdef CUDA_ON_CPU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_, &scheduler_stack_bottom_, &scheduler_stack_size_);
#endif
}

void Fiber::finish() {
#ifdef CUDA_ON_CPU_ASAN
  // No fake stack to keep: this fiber's frames are done with.
  __sanitizer_start_switch_fiber(nullptr, scheduler_stack_bottom_, scheduler_stack_size_);
#endif
  cuda_on_cpu_switch_context(&fiber_sp_, scheduler_sp_);
  __builtin_unreachable();
}

}  // namespace cuda_on_cpu
