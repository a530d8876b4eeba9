// CUDA_CHECK, CUBLAS_CHECK and NCCL_CHECK: every CUDA runtime, cuBLASLt and NCCL call goes
// through one of them, so a failure is reported through report_check_failure (statement,
// file:line, host, rank) with the library's own name and description of the error, and thrown as
// CheckFailure. The reporter is the program's own (a backend library takes it from the program
// that loads it), so it names the rank the program set.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "check.h"

#define CUDA_CHECK(statement)                                                                              \
  do {                                                                                                     \
    const cudaError_t trainctl_cuda_status = (statement);                                                  \
    if (trainctl_cuda_status != cudaSuccess)                                                               \
      ::trainctl::report_check_failure(#statement, __FILE__, __LINE__,                                     \
                                       std::string(cudaGetErrorName(trainctl_cuda_status)) + ": " +        \
                                           cudaGetErrorString(trainctl_cuda_status));                      \
  } while (false)

#define CUBLAS_CHECK(statement)                                                                            \
  do {                                                                                                     \
    const cublasStatus_t trainctl_cublas_status = (statement);                                             \
    if (trainctl_cublas_status != CUBLAS_STATUS_SUCCESS)                                                   \
      ::trainctl::report_check_failure(#statement, __FILE__, __LINE__,                                     \
                                       std::string(cublasLtGetStatusName(trainctl_cublas_status)) + ": " + \
                                           cublasLtGetStatusString(trainctl_cublas_status));               \
  } while (false)

#define NCCL_CHECK(statement)                                                                                \
  do {                                                                                                       \
    const ncclResult_t trainctl_nccl_result = (statement);                                                   \
    if (trainctl_nccl_result != ncclSuccess)                                                                 \
      ::trainctl::report_check_failure(#statement, __FILE__, __LINE__, ncclGetErrorString(trainctl_nccl_result)); \
  } while (false)
