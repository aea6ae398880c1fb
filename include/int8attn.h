/**
 * @file int8attn.h
 * @brief The whole public C API of int8attn: attention with INT8-quantized Q·Kᵀ.
 *
 * int8attn computes `O = softmax(sm_scale · Q·Kᵀ + mask) · V` on CUDA GPUs (sm80–sm90a) and on
 * the CPU, with three precision modes (EXACT, BALANCED, FAST), a timestep policy for diffusion
 * samplers, a persistent quantized K/V cache (cross-attention K/V, LLM decode), block-sparse
 * masks and block-mask prediction.
 *
 * Conventions used throughout this header:
 * - Every function returns an ::int8attn_status_t (0 = ::INT8ATTN_OK) unless stated otherwise.
 *   On failure, int8attn_last_error() returns a thread-local message that names the argument and
 *   the offending value, and no output tensor has been written.
 * - Out-parameters come first, then the handle, then inputs.
 * - Parameter structs start with `uint32_t struct_size` (set by their `_init` function); they
 *   only ever grow by appending fields, so an old caller keeps working with a new library.
 * - Tensors are described by ::int8attn_tensor_t (DLPack semantics: shape and strides in
 *   elements, a stride of 0 broadcasts). The caller owns all tensor memory.
 * - Streams are `void*` (a `cudaStream_t`, NULL = the legacy default stream); they are ignored
 *   for CPU tensors. GPU calls never synchronise the host and never allocate on the hot path
 *   once the workspace is large enough, so they can be captured into a CUDA graph. A captured
 *   call's workspace stays allocated for the graph's replays until the context is destroyed
 *   (also when a later, larger call grows the workspace); during a capture the context's
 *   workspace cannot grow (see int8attn_context_reserve_workspace()).
 * - Destroy functions accept NULL.
 * - Handles (context, K/V cache, policy) carry a tag: every function that takes one checks that
 *   it is a live handle of the expected kind and otherwise returns
 *   ::INT8ATTN_ERROR_INVALID_HANDLE with a message naming the argument; a destroy function
 *   given such a pointer frees nothing (and sets int8attn_last_error()). This is best effort,
 *   "where detectable": destroy clears the tag and frees the memory, so a destroyed handle is
 *   recognised only while that memory has not been reused by a new handle of the same kind, and
 *   reading it is still a use after free (AddressSanitizer reports it). It turns the common
 *   mistakes (double destroy, use after destroy, a context passed as a policy) into errors; it
 *   does not make them safe.
 *
 * @par Thread safety
 * - Functions without a handle (versions, status strings, features, device count,
 *   `*_params_init`) may be called from any thread at any time.
 * - A context (::int8attn_context_t) owns a workspace and a CPU thread pool: calls that take the
 *   same context must not run concurrently (serialise them, or use one context per thread).
 *   Different contexts are independent.
 * - A timestep policy is immutable after creation except through int8attn_policy_set_mode();
 *   concurrent reads (int8attn_policy_get(), forward calls) are safe while nobody modifies it.
 * - A K/V cache must not be written (append/reset) concurrently with any other use of it. A cache
 *   uses the context it was created with (its workspace, for the first append's statistics), so
 *   int8attn_kv_cache_append() counts as a call on that context: do not run it concurrently with
 *   other calls on the same context.
 * - int8attn_last_error() is per thread: read it on the thread whose call failed.
 */
#ifndef INT8ATTN_H
#define INT8ATTN_H

#include <stddef.h>
#include <stdint.h>

/** @defgroup export Export and versions
 *  @{ */

/** @brief Marks exported symbols (default visibility / dllexport when building the library). */
#if defined(_WIN32)
#if defined(INT8ATTN_BUILDING_LIBRARY)
#define INT8ATTN_API __declspec(dllexport)
#elif defined(INT8ATTN_STATIC)
#define INT8ATTN_API
#else
#define INT8ATTN_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define INT8ATTN_API __attribute__((visibility("default")))
#else
#define INT8ATTN_API
#endif

/** @brief Major version: incremented on incompatible API changes. */
#define INT8ATTN_VERSION_MAJOR 0
/** @brief Minor version: incremented when features are added compatibly. */
#define INT8ATTN_VERSION_MINOR 1
/** @brief Patch version: incremented for fixes. */
#define INT8ATTN_VERSION_PATCH 0
/** @brief The version as one number: major·10000 + minor·100 + patch. */
#define INT8ATTN_VERSION_NUMBER \
  (INT8ATTN_VERSION_MAJOR * 10000 + INT8ATTN_VERSION_MINOR * 100 + INT8ATTN_VERSION_PATCH)
/** @brief The version as a string "major.minor.patch". */
#define INT8ATTN_VERSION_STRING "0.1.0"
/** @brief ABI major version (the shared library's SOVERSION). Bindings refuse a library whose
 *  int8attn_abi_version() differs from the value they were written for. */
#define INT8ATTN_ABI_VERSION 1

/** @} */

#ifdef __cplusplus
extern "C" {
#endif

/** @defgroup status Status codes and errors
 *  @{ */

/** @brief Result of every fallible call. Values are stable and only ever appended. */
typedef int32_t int8attn_status_t;

/** @brief Status values, grouped by kind: 1xx invalid argument, 2xx not supported,
 *  3xx device/runtime, 9xx internal. */
enum int8attn_status_values {
  INT8ATTN_OK = 0,                           /**< Success. */
  INT8ATTN_ERROR_INVALID_ARGUMENT = 100,     /**< An argument is invalid (generic). */
  INT8ATTN_ERROR_NULL_POINTER = 101,         /**< A required pointer is NULL. */
  INT8ATTN_ERROR_BAD_SHAPE = 102,            /**< Wrong rank, mismatched or non-positive sizes. */
  INT8ATTN_ERROR_BAD_STRIDE = 103,           /**< Negative, overlapping or unsupported strides. */
  INT8ATTN_ERROR_BAD_DTYPE = 104,            /**< Unknown dtype, or dtypes that do not match. */
  INT8ATTN_ERROR_MISALIGNED = 105,           /**< A data pointer is not aligned to its element. */
  INT8ATTN_ERROR_BAD_STRUCT_SIZE = 106,      /**< struct_size smaller than the first version. */
  INT8ATTN_ERROR_ALIASING = 107,             /**< An output overlaps an input. */
  INT8ATTN_ERROR_BAD_DEVICE = 108,           /**< Unknown device, or mixed devices. */
  INT8ATTN_ERROR_SIZE_OVERFLOW = 109,        /**< A size overflows 64-bit/int32 indexing. */
  INT8ATTN_ERROR_CAPACITY_EXCEEDED = 110,    /**< A K/V cache would grow past its capacity. */
  INT8ATTN_ERROR_WORKSPACE_TOO_SMALL = 111,  /**< The caller's workspace is too small, or the
                                                  context's would have to grow while the call's
                                                  stream captures a CUDA graph. */
  INT8ATTN_ERROR_BAD_VALUE = 112,            /**< A scalar is out of range (NaN scale, …). */
  INT8ATTN_ERROR_INVALID_HANDLE = 113,       /**< Not a live handle of the expected kind (one
                                                  destroyed, or a context passed as a policy, …;
                                                  where detectable: see "Handles" above). */
  INT8ATTN_ERROR_NOT_SUPPORTED = 200,        /**< Valid but not supported (generic). */
  INT8ATTN_ERROR_UNSUPPORTED_ARCH = 201,     /**< No kernels for this GPU in this build. */
  INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM = 202, /**< Head dim not a multiple of 8 in [8, 256]. */
  INT8ATTN_ERROR_UNSUPPORTED_MODE = 203,     /**< Unknown precision mode, or not available here. */
  INT8ATTN_ERROR_BACKEND_UNAVAILABLE = 204,  /**< E.g. CUDA tensors but the build has no CUDA. */
  INT8ATTN_ERROR_DEVICE = 300,               /**< A CUDA runtime/driver call failed. */
  INT8ATTN_ERROR_OUT_OF_MEMORY = 301,        /**< Host or device allocation failed. */
  INT8ATTN_ERROR_INTERNAL = 900              /**< A bug in int8attn; please report it. */
};

/**
 * @brief Short, static English description of a status code.
 * @param[in] status Any value; unknown values give "unknown status".
 * @return A string with static storage duration; never NULL.
 */
INT8ATTN_API const char* int8attn_status_string(int8attn_status_t status);

/**
 * @brief The message of the last failed call made on this thread.
 *
 * The message names the argument and the value that was wrong, e.g.
 * "q: shape[3] (head dim) is 12; head dim must be a multiple of 8 in [8, 256]".
 * @return A thread-local string valid until the next int8attn call on this thread; "" when the
 *         last call succeeded. Never NULL.
 */
INT8ATTN_API const char* int8attn_last_error(void);

/** @} */

/** @defgroup version Runtime version and features
 *  @{ */

/** @brief The library's version as INT8ATTN_VERSION_NUMBER computes it.
 *  @return major·10000 + minor·100 + patch of the loaded library. */
INT8ATTN_API uint32_t int8attn_version_number(void);

/** @brief The library's version string, e.g. "0.1.0".
 *  @return A static string; never NULL. */
INT8ATTN_API const char* int8attn_version_string(void);

/** @brief The ABI major of the loaded library; compare with ::INT8ATTN_ABI_VERSION.
 *  @return The ABI version the library was built with. */
INT8ATTN_API uint32_t int8attn_abi_version(void);

/** @brief Feature bits returned by int8attn_features(). */
enum int8attn_feature_bits {
  INT8ATTN_FEATURE_CPU = 1u << 0,     /**< The CPU backend (always present). */
  INT8ATTN_FEATURE_CUDA = 1u << 1,    /**< The CUDA backend is compiled in. */
  INT8ATTN_FEATURE_SM80 = 1u << 2,    /**< Kernels for sm80/sm86 (INT8 mma.sync). */
  INT8ATTN_FEATURE_SM89 = 1u << 3,    /**< Kernels for sm89 (INT8 + FP8 mma.sync). */
  INT8ATTN_FEATURE_SM90A = 1u << 4,   /**< Kernels for sm90a (Hopper). */
  INT8ATTN_FEATURE_CPU_SIMD = 1u << 5 /**< The CPU backend was built with vector int8 dots. */
};

/** @brief Which backends and GPU architectures this build contains.
 *  @return A bitwise OR of ::int8attn_feature_bits values. */
INT8ATTN_API uint64_t int8attn_features(void);

/**
 * @brief Number of CUDA devices usable by this build.
 * @param[out] count Receives the count: 0 when the build has no CUDA backend, no driver is
 *             installed, or no device is present (none of these is an error).
 * @return ::INT8ATTN_OK, or ::INT8ATTN_ERROR_NULL_POINTER.
 */
INT8ATTN_API int8attn_status_t int8attn_device_count(int32_t* count);

/**
 * @brief Describe one CUDA device ("NVIDIA H100 80GB HBM3, sm_90, 132 SMs").
 * @param[out] buffer Receives a NUL-terminated description (truncated to fit).
 * @param[in] buffer_size Size of @p buffer in bytes (at least 1).
 * @param[in] device_id Index in [0, int8attn_device_count()).
 * @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_NULL_POINTER, ::INT8ATTN_ERROR_BAD_DEVICE, or
 *         ::INT8ATTN_ERROR_BACKEND_UNAVAILABLE without CUDA.
 */
INT8ATTN_API int8attn_status_t int8attn_device_describe(char* buffer, size_t buffer_size,
                                                        int32_t device_id);

/** @} */

/** @defgroup tensor Tensor descriptor
 *  @{ */

/** @brief Element types (`int8attn_tensor_t::dtype`). */
enum int8attn_dtype_values {
  INT8ATTN_DTYPE_F16 = 1,     /**< IEEE binary16. */
  INT8ATTN_DTYPE_BF16 = 2,    /**< bfloat16. */
  INT8ATTN_DTYPE_F32 = 3,     /**< IEEE binary32 (CPU attention, scales, LSE). */
  INT8ATTN_DTYPE_I8 = 4,      /**< int8 (quantized data). */
  INT8ATTN_DTYPE_I32 = 5,     /**< int32 (valid lengths). */
  INT8ATTN_DTYPE_U8 = 6,      /**< uint8 (block masks: 0 = skip, nonzero = keep). */
  INT8ATTN_DTYPE_FP8_E4M3 = 7 /**< FP8 E4M3 (quantized V). */
};

/** @brief Device types (`int8attn_tensor_t::device_type`), numbered as in DLPack. */
enum int8attn_device_values {
  INT8ATTN_DEVICE_CPU = 1, /**< Host memory. */
  INT8ATTN_DEVICE_CUDA = 2 /**< CUDA device memory (device_id selects the GPU). */
};

/** @brief Largest rank of a tensor descriptor. */
#define INT8ATTN_MAX_RANK 6

/** @brief Tokens per scale with ::INT8ATTN_GRANULARITY_PER_BLOCK: a head of N tokens has
 *  ⌈N / INT8ATTN_QUANT_BLOCK⌉ scales (int8attn_quantize's `scales` [B, H, ⌈N/64⌉]). */
#define INT8ATTN_QUANT_BLOCK 64
/** @brief Default query rows per block-mask block (`mask_q_block`, and int8attn_mask_params_t's
 *  `q_block`); a mask over Nq queries and Nk keys has ⌈Nq/q_block⌉ × ⌈Nk/k_block⌉ blocks per
 *  head. */
#define INT8ATTN_MASK_Q_BLOCK_DEFAULT 128
/** @brief Default keys per block-mask block (`mask_k_block`, and int8attn_mask_params_t's
 *  `k_block`). */
#define INT8ATTN_MASK_K_BLOCK_DEFAULT 64
/** @brief Largest head dim (head dims are multiples of 8 in [8, INT8ATTN_MAX_HEAD_DIM]). */
#define INT8ATTN_MAX_HEAD_DIM 256

/**
 * @brief A strided view of caller-owned memory (DLPack semantics, blittable).
 *
 * Element (i0, …, i{rank-1}) lives at `data + Σ ik·strides[k]` elements. Strides are in
 * elements, may be 0 (broadcast), must not be negative. Entries past `rank` are ignored.
 * Attention tensors are rank 4 in the logical order [B, H, N, D]; NHD memory is expressed by
 * strides (e.g. shape [B,H,N,D] with strides [N·H·D, D, H·D, 1]).
 */
typedef struct int8attn_tensor_t {
  void* data;                         /**< First element; caller-owned. */
  int32_t device_type;                /**< ::INT8ATTN_DEVICE_CPU or ::INT8ATTN_DEVICE_CUDA. */
  int32_t device_id;                  /**< CUDA device index; 0 for the CPU. */
  int32_t dtype;                      /**< An ::int8attn_dtype_values value. */
  int32_t rank;                       /**< Number of dimensions, 1..::INT8ATTN_MAX_RANK. */
  int64_t shape[INT8ATTN_MAX_RANK];   /**< Size of each dimension. */
  int64_t strides[INT8ATTN_MAX_RANK]; /**< Stride of each dimension, in elements. */
} int8attn_tensor_t;

/**
 * @brief Fill a descriptor for a contiguous (row-major) tensor.
 * @param[out] tensor The descriptor to fill.
 * @param[in] data Pointer to the first element (caller-owned).
 * @param[in] device_type ::INT8ATTN_DEVICE_CPU or ::INT8ATTN_DEVICE_CUDA.
 * @param[in] device_id CUDA device index (0 for the CPU).
 * @param[in] dtype An ::int8attn_dtype_values value.
 * @param[in] rank 1..::INT8ATTN_MAX_RANK.
 * @param[in] shape @p rank sizes.
 * @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_NULL_POINTER or ::INT8ATTN_ERROR_BAD_SHAPE.
 */
INT8ATTN_API int8attn_status_t int8attn_tensor_init_contiguous(int8attn_tensor_t* tensor,
                                                               void* data, int32_t device_type,
                                                               int32_t device_id, int32_t dtype,
                                                               int32_t rank, const int64_t* shape);

/** @} */

/** @defgroup context Context
 *  @{ */

/** @brief Opaque context: device binding, workspace and CPU thread pool. */
typedef struct int8attn_context int8attn_context_t;

/** @brief Parameters of int8attn_context_create(). */
typedef struct int8attn_context_params_t {
  uint32_t struct_size; /**< sizeof(int8attn_context_params_t); set by the init function. */
  int32_t device_id;    /**< CUDA device this context serves (default 0); CPU calls ignore it. */
  int32_t num_threads;  /**< CPU threads (the calling thread included), in [0, 1024];
                               0 (default) = all hardware threads, at most 1024. The threads
                               start on the first CPU call; if the system cannot start them,
                               that call fails with ::INT8ATTN_ERROR_OUT_OF_MEMORY (a message
                               naming num_threads) and the next CPU call tries again. */
  int32_t reserved0;    /**< Must be 0. */
  uint64_t workspace_bytes; /**< Device workspace allocated up front (0, default: on first use). */
} int8attn_context_params_t;

/** @brief Set @p params to the defaults (and its struct_size).
 *  @param[out] params Struct to initialise; NULL is ignored. */
INT8ATTN_API void int8attn_context_params_init(int8attn_context_params_t* params);

/**
 * @brief Create a context.
 * @param[out] context Receives the new context; the caller frees it with int8attn_context_destroy().
 * @param[in] params Parameters, or NULL for the defaults.
 * @return ::INT8ATTN_OK; ::INT8ATTN_ERROR_NULL_POINTER; ::INT8ATTN_ERROR_BAD_STRUCT_SIZE;
 *         ::INT8ATTN_ERROR_BAD_VALUE (num_threads negative or above 1024);
 *         ::INT8ATTN_ERROR_BAD_DEVICE; ::INT8ATTN_ERROR_OUT_OF_MEMORY.
 */
INT8ATTN_API int8attn_status_t int8attn_context_create(int8attn_context_t** context,
                                                       const int8attn_context_params_t* params);

/** @brief Destroy a context and free its workspace. Waits for its GPU work. NULL is ignored, and
 *         so (where detectable) is a pointer that is not a live context: nothing is freed and
 *         int8attn_last_error() says why.
 *  @param[in] context The context, or NULL. */
INT8ATTN_API void int8attn_context_destroy(int8attn_context_t* context);

/**
 * @brief Make sure the context's own workspace holds at least @p bytes (allocates now, so that
 *        later forward calls allocate nothing, e.g. before CUDA-graph capture).
 *
 * A call made while its stream captures a CUDA graph cannot grow the workspace (an allocation
 * would invalidate the capture): it fails with ::INT8ATTN_ERROR_WORKSPACE_TOO_SMALL unless the
 * workspace already holds what int8attn_forward_workspace_size() reports (or an eager call of
 * the same shape ran before). The buffer a captured call used is never freed while the context
 * lives: when a later call needs more, it is kept for the graph and a larger one allocated, so
 * replays stay valid. Reserving the largest size before the first capture avoids keeping such
 * buffers.
 * @param[in] context The context.
 * @param[in] device_type Which workspace: ::INT8ATTN_DEVICE_CUDA (device memory) or
 *            ::INT8ATTN_DEVICE_CPU (host scratch).
 * @param[in] bytes Requested size.
 * @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_NULL_POINTER, ::INT8ATTN_ERROR_INVALID_HANDLE,
 *         ::INT8ATTN_ERROR_OUT_OF_MEMORY, ::INT8ATTN_ERROR_BACKEND_UNAVAILABLE.
 */
INT8ATTN_API int8attn_status_t int8attn_context_reserve_workspace(int8attn_context_t* context,
                                                                  int32_t device_type,
                                                                  uint64_t bytes);

/**
 * @brief Wait until all work the library queued on @p stream has finished.
 * @param[in] context The context (selects the device).
 * @param[in] stream A cudaStream_t or NULL (legacy default stream). Without CUDA: no-op.
 * @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_NULL_POINTER, ::INT8ATTN_ERROR_INVALID_HANDLE,
 *         ::INT8ATTN_ERROR_DEVICE (an earlier asynchronous kernel failure is reported here).
 */
INT8ATTN_API int8attn_status_t int8attn_synchronize(int8attn_context_t* context, void* stream);

/** @} */

/** @defgroup modes Precision modes and the timestep policy
 *  @{ */

/** @brief Precision modes (`mode` fields).
 *
 *  A forward call on fresh K/V with at most 128 keys, or at most 512 keys whose count times the
 *  head dim (rounded up to a multiple of 32) is at most 32768, runs EXACT whatever its mode, on
 *  every backend: such a call (text cross-attention) is bound by reading Q and writing O, or by
 *  the quantized path's preparation, so quantization would add only its error. Calls against a
 *  K/V cache keep the cache's mode. */
enum int8attn_mode_values {
  INT8ATTN_MODE_DEFAULT = 0,  /**< Use the policy's mode for the timestep, else BALANCED. */
  INT8ATTN_MODE_EXACT = 1,    /**< fp16/bf16 (fp32 on CPU) flash attention, no quantization. */
  INT8ATTN_MODE_BALANCED = 2, /**< INT8 Q·Kᵀ (K smoothed), P·V in fp16 with fp32 accumulation. */
  INT8ATTN_MODE_FAST = 3      /**< INT8 Q·Kᵀ, P and V in FP8 E4M3 (sm89/sm90; emulated on CPU),
                                   two-level fp32 accumulation. On sm80/sm86 (no FP8 tensor
                                   cores) a FAST forward runs as BALANCED. */
};

/** @brief Quantization scale granularity (`q_granularity`, `k_granularity`). */
enum int8attn_granularity_values {
  INT8ATTN_GRANULARITY_DEFAULT = 0,   /**< Per token (for Q and for K). */
  INT8ATTN_GRANULARITY_PER_BLOCK = 1, /**< One scale per 64 consecutive tokens of a head. */
  INT8ATTN_GRANULARITY_PER_TOKEN = 2  /**< One scale per token (row) of a head. */
};

/** @brief Numerical refinement flags (`flags` fields). All are exact transformations. */
enum int8attn_flag_values {
  /** Subtract K's per-channel mean before quantizing K; softmax is invariant to it (to any
   *  per-channel shift, so the mean is taken over a sample of the valid tokens: every 64-token
   *  chunk up to 1,023 tokens, at least 8 chunks beyond). On by default. */
  INT8ATTN_FLAG_SMOOTH_K = 1u << 0,
  /** Subtract V's per-channel mean before quantizing V and add it back to O (rows of P sum
   *  to 1). On by default. */
  INT8ATTN_FLAG_SMOOTH_V = 1u << 1,
  /** Channel balancing: scale channel c of Q by 1/α_c and of K by α_c, with
   *  α_c = sqrt(max|q_c| / max|k_c|) (maxima over the same samples of Q and K as K's mean),
   *  before quantizing (q·k is unchanged). Helps inputs with
   *  outlier channels in only one of Q and K. On by default for int8attn_forward() (not
   *  applicable to a cache, whose K is quantized before any Q is seen). Independently of
   *  this flag, BALANCED and FAST rotate Q and K by the same orthonormal 8-point
   *  Walsh–Hadamard transform of each group of 8 channels before INT8 (q·k is unchanged), which
   *  spreads an outlier channel's range over its group. */
  INT8ATTN_FLAG_BALANCE_CHANNELS = 1u << 2,
  /** Disable the defaults above: only flags given explicitly apply. Without this flag,
   *  SMOOTH_K | SMOOTH_V (and BALANCE_CHANNELS for int8attn_forward()) are added to whatever
   *  is passed. */
  INT8ATTN_FLAG_EXPLICIT = 1 << 30
};

/** @brief Opaque timestep policy: maps a sampler step to a precision mode and a scale multiplier. */
typedef struct int8attn_policy int8attn_policy_t;

/** @brief Parameters of int8attn_policy_create(). */
typedef struct int8attn_policy_params_t {
  uint32_t struct_size;   /**< sizeof(int8attn_policy_params_t); set by the init function. */
  int32_t num_timesteps;  /**< Number of sampler steps T (timesteps are 0..T-1), or 0 when
                                    @p sigmas is given (then T = num_sigmas). */
  const float* sigmas;    /**< Optional noise schedule, one sigma per step (copied). */
  int32_t num_sigmas;     /**< Length of @p sigmas. */
  int32_t default_mode;   /**< Mode for ordinary steps (default ::INT8ATTN_MODE_FAST). */
  int32_t edge_mode;      /**< Mode for the protected first/last steps (default EXACT). */
  int32_t num_first_edge; /**< First steps run in edge_mode (default 1). */
  int32_t num_last_edge;  /**< Last steps run in edge_mode (default 1). */
  float sigma_edge_above; /**< With sigmas: steps with sigma ≥ this also use edge_mode
                                    (default +inf: off). */
  float sigma_edge_below; /**< With sigmas: steps with sigma ≤ this also use edge_mode
                                    (default 0: off). */
  const float* scale_multipliers; /**< Optional per-step multipliers in (0, 1] of the INT8 scales
                                       (the seeds' LUT, length T, copied): values below 1 clip the
                                       largest |x| to favour resolution of the bulk. NULL = 1. */
} int8attn_policy_params_t;

/** @brief Set @p params to the defaults (and its struct_size).
 *  @param[out] params Struct to initialise; NULL is ignored. */
INT8ATTN_API void int8attn_policy_params_init(int8attn_policy_params_t* params);

/**
 * @brief Build a policy once per sampler; pass it to every forward call with the step index.
 * @param[out] policy Receives the policy; free with int8attn_policy_destroy().
 * @param[in] params Parameters (not NULL). Arrays are copied.
 * @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_NULL_POINTER, ::INT8ATTN_ERROR_BAD_STRUCT_SIZE,
 *         ::INT8ATTN_ERROR_BAD_VALUE (no steps, multiplier outside (0, 1], NaN sigma),
 *         ::INT8ATTN_ERROR_UNSUPPORTED_MODE.
 */
INT8ATTN_API int8attn_status_t int8attn_policy_create(int8attn_policy_t** policy,
                                                      const int8attn_policy_params_t* params);

/** @brief Destroy a policy. NULL is ignored, and so (where detectable) is a pointer that is not
 *         a live policy: nothing is freed and int8attn_last_error() says why.
 *  @param[in] policy The policy, or NULL. */
INT8ATTN_API void int8attn_policy_destroy(int8attn_policy_t* policy);

/**
 * @brief Override the mode of one step.
 * @param[in] policy The policy.
 * @param[in] timestep Step index in [0, T).
 * @param[in] mode ::INT8ATTN_MODE_EXACT, ::INT8ATTN_MODE_BALANCED or ::INT8ATTN_MODE_FAST.
 * @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_NULL_POINTER, ::INT8ATTN_ERROR_INVALID_HANDLE,
 *         ::INT8ATTN_ERROR_BAD_VALUE, ::INT8ATTN_ERROR_UNSUPPORTED_MODE.
 */
INT8ATTN_API int8attn_status_t int8attn_policy_set_mode(int8attn_policy_t* policy, int32_t timestep,
                                                        int32_t mode);

/**
 * @brief What the policy decides for one step.
 * @param[out] mode Receives the mode (may be NULL).
 * @param[out] scale_multiplier Receives the scale multiplier (may be NULL).
 * @param[in] policy The policy.
 * @param[in] timestep Step index in [0, T).
 * @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_NULL_POINTER, ::INT8ATTN_ERROR_INVALID_HANDLE,
 *         ::INT8ATTN_ERROR_BAD_VALUE.
 */
INT8ATTN_API int8attn_status_t int8attn_policy_get(int32_t* mode, float* scale_multiplier,
                                                   const int8attn_policy_t* policy,
                                                   int32_t timestep);

/** @brief Number of steps T of a policy.
 *  @param[out] num_timesteps Receives T.
 *  @param[in] policy The policy.
 *  @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_NULL_POINTER or ::INT8ATTN_ERROR_INVALID_HANDLE. */
INT8ATTN_API int8attn_status_t int8attn_policy_num_timesteps(int32_t* num_timesteps,
                                                             const int8attn_policy_t* policy);

/** @} */

/** @defgroup forward Attention
 *  @{ */

/**
 * @brief Options of int8attn_forward() and int8attn_kv_cache_forward().
 *
 * Semantics: `O[b,h,i,:] = Σ_j P[i,j]·V[b,h/G,j,:]` with `P = softmax_j(sm_scale·q_i·k_j)` over
 * the visible keys j of row i, G = Hq/Hkv. Key j is visible to query i when j < L_b (L_b the valid
 * length of batch b, Nk by default), when causal is off or `j ≤ i + L_b − Nq` (bottom-right
 * aligned, as for appended queries), and when the block mask keeps block (i/q_block, j/k_block).
 * A row with no visible key gets O = 0 and LSE = −inf.
 */
typedef struct int8attn_forward_params_t {
  uint32_t struct_size;   /**< sizeof(int8attn_forward_params_t); set by the init function. */
  int32_t mode;           /**< ::int8attn_mode_values; default ::INT8ATTN_MODE_DEFAULT. */
  float sm_scale;         /**< Softmax scale; 0 (default) = 1/sqrt(D). Must be finite. */
  int32_t causal;         /**< Nonzero: causal mask (see above). Default 0. */
  int32_t q_granularity;  /**< ::int8attn_granularity_values for Q; default per token. */
  int32_t k_granularity;  /**< ::int8attn_granularity_values for K; default per token. */
  uint32_t flags;         /**< ::int8attn_flag_values; default 0 (= SMOOTH_K | SMOOTH_V |
                                 BALANCE_CHANNELS; a cache forward: SMOOTH_K | SMOOTH_V). */
  float scale_multiplier; /**< Multiplier in (0, 1] of the INT8 scales; default 1. A policy's
                                 multiplier for the timestep is applied on top of it. */
  const int8attn_tensor_t* k_lengths;  /**< Optional int32 [B] valid key lengths (same device as
                                            Q), each in [0, Nk]. NULL = all Nk keys. */
  const int8attn_tensor_t* block_mask; /**< Optional uint8 [B or 1, Hq or 1, ⌈Nq/q_block⌉,
                                            ⌈Nk/k_block⌉] (size-1 dims broadcast). NULL = dense. */
  int32_t mask_q_block;                /**< Query rows per mask block; default 128. */
  int32_t mask_k_block;                /**< Keys per mask block; default 64. */
  const int8attn_tensor_t* lse;        /**< Optional float32 [B, Hq, Nq] output: natural-log
                                     log-sum-exp of the scaled scores of each row. The struct
                                     is const, the memory it points to is written. */
  const int8attn_policy_t* policy;     /**< Optional timestep policy (not owned). */
  int32_t timestep;                    /**< Step index for @p policy; ignored without a policy. */
  int32_t reserved0;                   /**< Must be 0. */
  void* workspace;          /**< Optional caller workspace on the tensors' device; NULL = the
                                 context's own (grown on demand, except during a CUDA-graph
                                 capture: int8attn_context_reserve_workspace()). */
  uint64_t workspace_bytes; /**< Size of @p workspace. */
  void* stream;             /**< cudaStream_t for GPU tensors; NULL = default stream. */
} int8attn_forward_params_t;

/** @brief Set @p params to the defaults (and its struct_size).
 *  @param[out] params Struct to initialise; NULL is ignored. */
INT8ATTN_API void int8attn_forward_params_init(int8attn_forward_params_t* params);

/**
 * @brief Attention: `O = softmax(sm_scale·Q·Kᵀ + mask)·V`.
 *
 * Q is [B, Hq, Nq, D], K and V are [B, Hkv, Nk, D] with Hq a multiple of Hkv; O is [B, Hq, Nq, D].
 * D is a multiple of 8 in [8, 256]. GPU: fp16 or bf16 inputs, O of the same
 * dtype as Q. CPU: fp16, bf16 or fp32. All tensors on one device. Stride 0 on B or H of K/V
 * broadcasts one K/V to several batches/heads, and they are then quantized once.
 * Asynchronous on the GPU (ordered on params->stream).
 *
 * @param[in] context The context.
 * @param[in] q Query tensor.
 * @param[in] k Key tensor.
 * @param[in] v Value tensor.
 * @param[in] o Output tensor (the descriptor is const; the memory it points to is written).
 *              Must not overlap Q, K, V.
 * @param[in] params Options, or NULL for the defaults.
 * @return ::INT8ATTN_OK or an error status; on error nothing has been written to @p o or LSE.
 */
INT8ATTN_API int8attn_status_t int8attn_forward(int8attn_context_t* context,
                                                const int8attn_tensor_t* q,
                                                const int8attn_tensor_t* k,
                                                const int8attn_tensor_t* v,
                                                const int8attn_tensor_t* o,
                                                const int8attn_forward_params_t* params);

/**
 * @brief Workspace bytes int8attn_forward() needs for these tensors and options.
 * @param[out] bytes Receives the size (0 if none is needed).
 * @param[in] context The context.
 * @param[in] q Query tensor (data may be NULL).
 * @param[in] k Key tensor (data may be NULL).
 * @param[in] v Value tensor (data may be NULL).
 * @param[in] params Options, or NULL.
 * @return ::INT8ATTN_OK or the status int8attn_forward() would give for the shapes.
 */
INT8ATTN_API int8attn_status_t int8attn_forward_workspace_size(
    uint64_t* bytes, int8attn_context_t* context, const int8attn_tensor_t* q,
    const int8attn_tensor_t* k, const int8attn_tensor_t* v,
    const int8attn_forward_params_t* params);

/** @} */

/** @defgroup quantize Quantization
 *  @{ */

/** @brief Options of int8attn_quantize(). */
typedef struct int8attn_quantize_params_t {
  uint32_t struct_size; /**< sizeof(int8attn_quantize_params_t); set by the init function. */
  int32_t granularity;  /**< ::INT8ATTN_GRANULARITY_PER_BLOCK (64 tokens, default) or PER_TOKEN. */
  int32_t smooth;       /**< Nonzero: subtract the per-channel mean over tokens first. Default 0. */
  float scale_multiplier; /**< In (0, 1]; default 1. */
  void* stream;           /**< cudaStream_t for GPU tensors. */
} int8attn_quantize_params_t;

/** @brief Set @p params to the defaults (and its struct_size).
 *  @param[out] params Struct to initialise; NULL is ignored. */
INT8ATTN_API void int8attn_quantize_params_init(int8attn_quantize_params_t* params);

/**
 * @brief Quantize x [B, H, N, D] (fp16/bf16/fp32) to symmetric int8 with the library's maths:
 *        `q = clamp(round_half_even((x − mean)/scale), −127, 127)`,
 *        `scale = multiplier·max|x − mean| / 127` over the scale's group (or 1 if that is 0).
 * @param[in] context The context.
 * @param[in] x Input.
 * @param[in] x_int8 int8 output of the same shape (written).
 * @param[in] scales float32 output [B, H, G] with G = ⌈N/64⌉ (per block) or N (per token) (written).
 * @param[in] mean float32 output [B, H, D] of the subtracted means (written), required when
 *            smooth is set, else NULL.
 * @param[in] params Options, or NULL for the defaults.
 * @return ::INT8ATTN_OK or an error status; on error nothing is written.
 */
INT8ATTN_API int8attn_status_t int8attn_quantize(int8attn_context_t* context,
                                                 const int8attn_tensor_t* x,
                                                 const int8attn_tensor_t* x_int8,
                                                 const int8attn_tensor_t* scales,
                                                 const int8attn_tensor_t* mean,
                                                 const int8attn_quantize_params_t* params);

/** @} */

/** @defgroup cache Persistent quantized K/V cache
 *  @{ */

/** @brief Opaque quantized K/V cache, owned by the library. */
typedef struct int8attn_kv_cache int8attn_kv_cache_t;

/** @brief Parameters of int8attn_kv_cache_create(). */
typedef struct int8attn_kv_cache_params_t {
  uint32_t struct_size; /**< sizeof(int8attn_kv_cache_params_t); set by the init function. */
  int32_t device_type;  /**< Where the cache lives (default ::INT8ATTN_DEVICE_CUDA if the build
                               has CUDA and a device exists, else CPU). */
  int64_t batch;        /**< B (≥ 1). */
  int64_t num_kv_heads; /**< Hkv (≥ 1). */
  int64_t capacity;     /**< Maximum tokens per sequence (≥ 1). */
  int64_t head_dim;     /**< D (multiple of 8 in [8, 256]). */
  int32_t mode;         /**< ::INT8ATTN_MODE_BALANCED (int8 K, fp16 V, default) or
                               ::INT8ATTN_MODE_FAST (int8 K, FP8 V). */
  uint32_t flags;       /**< SMOOTH_K / SMOOTH_V as for forward (default both). The means are
                               taken from the first write and kept. */
  void* stream;         /**< Stream used for the initial device allocation/zeroing. */
} int8attn_kv_cache_params_t;

/** @brief Set @p params to the defaults (and its struct_size).
 *  @param[out] params Struct to initialise; NULL is ignored. */
INT8ATTN_API void int8attn_kv_cache_params_init(int8attn_kv_cache_params_t* params);

/**
 * @brief Create an empty cache (length 0) on the context's device or the CPU.
 * @param[out] cache Receives the cache; free with int8attn_kv_cache_destroy().
 * @param[in] context The context (must outlive the cache).
 * @param[in] params Parameters (not NULL).
 * @return ::INT8ATTN_OK or an error status.
 */
INT8ATTN_API int8attn_status_t int8attn_kv_cache_create(int8attn_kv_cache_t** cache,
                                                        int8attn_context_t* context,
                                                        const int8attn_kv_cache_params_t* params);

/** @brief Destroy a cache and free its memory. NULL is ignored, and so (where detectable) is a
 *         pointer that is not a live cache: nothing is freed and int8attn_last_error() says why.
 *  @param[in] cache The cache, or NULL. */
INT8ATTN_API void int8attn_kv_cache_destroy(int8attn_kv_cache_t* cache);

/** @brief Set the cache's length to 0 and forget its smoothing means.
 *  @param[in] cache The cache.
 *  @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_NULL_POINTER or ::INT8ATTN_ERROR_INVALID_HANDLE. */
INT8ATTN_API int8attn_status_t int8attn_kv_cache_reset(int8attn_kv_cache_t* cache);

/** @brief Current length (tokens per sequence) of the cache.
 *  @param[out] length Receives the length.
 *  @param[in] cache The cache.
 *  @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_NULL_POINTER or ::INT8ATTN_ERROR_INVALID_HANDLE. */
INT8ATTN_API int8attn_status_t int8attn_kv_cache_length(int64_t* length,
                                                        const int8attn_kv_cache_t* cache);

/**
 * @brief Quantize K and V [B, Hkv, n, D] (fp16/bf16/fp32, the cache's device) and append them
 *        at the cache's current length (the same position for every sequence). The first write
 *        after create/reset also fixes the smoothing means.
 * @param[in] cache The cache.
 * @param[in] k Keys to append.
 * @param[in] v Values to append.
 * @param[in] stream cudaStream_t for a GPU cache.
 * @return ::INT8ATTN_OK, ::INT8ATTN_ERROR_CAPACITY_EXCEEDED, or another error status; on error
 *         the cache is unchanged.
 */
INT8ATTN_API int8attn_status_t int8attn_kv_cache_append(int8attn_kv_cache_t* cache,
                                                        const int8attn_tensor_t* k,
                                                        const int8attn_tensor_t* v, void* stream);

/**
 * @brief Attention of Q [B, Hq, Nq, D] against the cache's first `length` tokens (the decode path
 *        when Nq is small: the key range is split across the GPU, flash-decoding style).
 *        params->k_lengths may shorten individual sequences further.
 * @param[in] context The context.
 * @param[in] q Queries (same device as the cache).
 * @param[in] cache The cache.
 * @param[in] o Output [B, Hq, Nq, D] (written).
 * @param[in] params Options, or NULL. mode must be DEFAULT or the cache's mode.
 * @return ::INT8ATTN_OK or an error status.
 */
INT8ATTN_API int8attn_status_t int8attn_kv_cache_forward(int8attn_context_t* context,
                                                         const int8attn_tensor_t* q,
                                                         const int8attn_kv_cache_t* cache,
                                                         const int8attn_tensor_t* o,
                                                         const int8attn_forward_params_t* params);

/** @} */

/** @defgroup sparse Block-sparse masks
 *  @{ */

/** @brief Parameters of int8attn_predict_block_mask(). */
typedef struct int8attn_mask_params_t {
  uint32_t struct_size; /**< sizeof(int8attn_mask_params_t); set by the init function. */
  int32_t q_block;      /**< Query rows per block (default 128). */
  int32_t k_block;      /**< Keys per block (default 64). */
  float keep_ratio;     /**< If in (0, 1]: keep the top ⌈keep_ratio·nkb⌉ key blocks per query
                               block (default 0 = use threshold). */
  float threshold;      /**< Else keep the smallest set of key blocks whose pooled softmax mass
                               reaches this fraction (default 0.95). */
  int32_t causal;       /**< Nonzero: never keep blocks entirely above the causal diagonal. */
  float sm_scale;       /**< 0 = 1/sqrt(D). */
  void* stream;         /**< cudaStream_t for GPU tensors. */
} int8attn_mask_params_t;

/** @brief Set @p params to the defaults (and its struct_size).
 *  @param[out] params Struct to initialise; NULL is ignored. */
INT8ATTN_API void int8attn_mask_params_init(int8attn_mask_params_t* params);

/**
 * @brief Predict a block mask from mean-pooled Q and K blocks: for each query block, the pooled
 *        scores softmax over key blocks decides which key blocks to keep. The first and (for
 *        causal) the diagonal key block are always kept, so no row is left without keys.
 * @param[in] context The context.
 * @param[in] q Queries [B, Hq, Nq, D].
 * @param[in] k Keys [B, Hkv, Nk, D].
 * @param[in] mask uint8 output [B, Hq, ⌈Nq/q_block⌉, ⌈Nk/k_block⌉] (written): 1 keep, 0 skip.
 *            Pass it to forward with the same q_block/k_block.
 * @param[in] params Options, or NULL for the defaults.
 * @return ::INT8ATTN_OK or an error status.
 */
INT8ATTN_API int8attn_status_t int8attn_predict_block_mask(int8attn_context_t* context,
                                                           const int8attn_tensor_t* q,
                                                           const int8attn_tensor_t* k,
                                                           const int8attn_tensor_t* mask,
                                                           const int8attn_mask_params_t* params);

/** @} */

/** @defgroup rotary Rotary position embedding
 *  @{ */

/** @brief How int8attn_rotary() evaluates a pair's rotation: the arithmetic of the framework
 *         code it stands in for, so that the result is that code's, bit for bit. */
enum int8attn_rotary_arithmetic_values {
  /** Each product and each sum rounded to float32 on its own:
   *  `y0 = x0·c0 − x1·s0`, `y1 = x1·c1 + x0·s1`. Real cos/sin tables evaluated
   *  elementwise, as diffusers' `apply_rotary_emb(x, (cos, sin))` does (Flux, HunyuanVideo,
   *  Wan). The default. */
  INT8ATTN_ROTARY_ROUNDED = 0,
  /** The complex product (x0 + i·x1)(c + i·s) with one fused multiply-add per part, the
   *  products it adds rounded to float32: `y0 = fma(x0, c0, −(x1·s0))`,
   *  `y1 = fma(x0, s1, x1·c1)`. That is how PyTorch's CUDA kernels (sm_90, PyTorch 2.11)
   *  evaluate `torch.view_as_complex(x) * freqs_cis` with x on the left (Qwen-Image, Z-Image,
   *  Lumina 2); pass the tables as cos[n][2i] = cos[n][2i+1] = Re f, sin likewise Im f. */
  INT8ATTN_ROTARY_COMPLEX_FMA = 1
};

/** @brief Options of int8attn_rotary(). */
typedef struct int8attn_rotary_params_t {
  uint32_t struct_size; /**< sizeof(int8attn_rotary_params_t); set by the init function. */
  int32_t arithmetic;   /**< ::int8attn_rotary_arithmetic_values; default ROUNDED. */
  void* stream;         /**< cudaStream_t for GPU tensors. */
} int8attn_rotary_params_t;

/** @brief Set @p params to the defaults (and its struct_size).
 *  @param[out] params Struct to initialise; NULL is ignored. */
INT8ATTN_API void int8attn_rotary_params_init(int8attn_rotary_params_t* params);

/**
 * @brief Rotate the interleaved channel pairs of x [B, H, N, D] by per-token angles (rotary
 *        position embedding, the convention of Flux and of diffusers' `apply_rotary_emb`):
 *        `out[2i] = x[2i]·cos[n][2i] − x[2i+1]·sin[n][2i]` and
 *        `out[2i+1] = x[2i+1]·cos[n][2i+1] + x[2i]·sin[n][2i+1]`, in float32 with the rounding
 *        steps that params->arithmetic names (by default each product and each sum rounded on
 *        its own, no fused multiply-add), the result rounded to nearest-even in out's dtype:
 *        the same bits on every backend.
 *        One pass over x, so Q or K can be rotated right before int8attn_forward() without the
 *        several passes of a framework's elementwise kernels.
 * @param[in] context The context.
 * @param[in] x Input [B, H, N, D] (fp16/bf16/fp32), D even; any strides (e.g. NHD memory).
 * @param[in] cos float32 [N, D], token n's cosines; strides may be 0 (broadcast).
 * @param[in] sin float32 [N, D], token n's sines; strides may be 0 (broadcast).
 * @param[in] out Output with x's shape and dtype (written); it may be x itself (in place) but
 *            must not otherwise overlap x, cos or sin.
 * @param[in] params Options, or NULL for the defaults.
 * @return ::INT8ATTN_OK or an error status; on error nothing is written.
 */
INT8ATTN_API int8attn_status_t int8attn_rotary(int8attn_context_t* context,
                                               const int8attn_tensor_t* x,
                                               const int8attn_tensor_t* cos,
                                               const int8attn_tensor_t* sin,
                                               const int8attn_tensor_t* out,
                                               const int8attn_rotary_params_t* params);

/** @} */

/** @defgroup rms_norm RMS normalization
 *  @{ */

/** @brief Options of int8attn_rms_norm(). */
typedef struct int8attn_rms_norm_params_t {
  uint32_t struct_size; /**< sizeof(int8attn_rms_norm_params_t); set by the init function. */
  float eps;            /**< Added to the mean square before the root; ≥ 0. Default 1e-6. */
  void* stream;         /**< cudaStream_t for GPU tensors. */
} int8attn_rms_norm_params_t;

/** @brief Set @p params to the defaults (and its struct_size).
 *  @param[out] params Struct to initialise; NULL is ignored. */
INT8ATTN_API void int8attn_rms_norm_params_init(int8attn_rms_norm_params_t* params);

/**
 * @brief RMS-normalize each row of x [B, H, N, D] over its D channels, optionally times a
 *        per-channel weight (the query/key normalization of Flux, SD3.5, Wan and HunyuanVideo,
 *        in diffusers' `RMSNorm` convention), in one read of x and one write of out:
 *        `r = 1 / sqrt(mean(x²) + eps)`, `y = x·r`; with a fp16/bf16 weight, y is rounded to the
 *        weight's dtype and then multiplied by it; with a float32 weight it is multiplied in
 *        float32; the result is rounded to nearest-even in out's dtype. Every product, sum,
 *        division and root is rounded to float32, and the squares are summed in one fixed order
 *        (a row's 8-channel chunks dealt round-robin to 2^k ≤ 32 partial sums, then summed in
 *        pairs), so the result is bit-identical on every backend. Against diffusers' own
 *        evaluation (another summation order, an approximate reciprocal root) a 16-bit result
 *        differs by at most two units in the last place in about one element in 10⁵ (one
 *        rounding of x·r moving, then carried through the weight's), a float32 one by a
 *        few float32 roundings.
 *        To normalize across heads (Wan), describe the [B, N, H·D] rows as [B, 1, N, H·D].
 * @param[in] context The context.
 * @param[in] x Input [B, H, N, D] (fp16/bf16/fp32); any strides (e.g. NHD memory).
 * @param[in] weight Per-channel weight [D] (fp16/bf16/fp32, any stride), or NULL for none.
 * @param[in] out Output with x's shape, any of fp16/bf16/fp32 (written); it may be x itself
 *            (in place: same data and strides, and then the same dtype) but must not otherwise
 *            overlap x or weight.
 * @param[in] params Options, or NULL for the defaults.
 * @return ::INT8ATTN_OK or an error status; on error nothing is written.
 */
INT8ATTN_API int8attn_status_t int8attn_rms_norm(int8attn_context_t* context,
                                                 const int8attn_tensor_t* x,
                                                 const int8attn_tensor_t* weight,
                                                 const int8attn_tensor_t* out,
                                                 const int8attn_rms_norm_params_t* params);

/** @} */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* INT8ATTN_H */
