/* Cross-language check, C participant: see README.md. Usage: xlang OUT_DIR */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "int8attn.h"

/* N > 512: on at most 512 keys (of 40 channels) every mode runs EXACT (README.md). */
enum { B = 1, H = 2, N = 550, D = 40, LEN = B * H * N * D };

static void input(float* x, int64_t c) {
  for (int64_t i = 0; i < LEN; ++i) {
    int64_t k = (i * 7919 + c * 7207) % 1999;
    double v = (double)(k - 999) / 400.0;
    if (c == 2) v += (double)((i % D) % 5) * 0.25;
    x[i] = (float)v;
  }
}

static int write_bits(const char* dir, const char* name, const float* o) {
  char path[4096];
  snprintf(path, sizeof path, "%s/c_%s.txt", dir, name);
  FILE* f = fopen(path, "w");
  if (!f) {
    perror(path);
    return 1;
  }
  for (int i = 0; i < LEN; ++i) {
    uint32_t u;
    memcpy(&u, &o[i], sizeof u);
    fprintf(f, "%08x\n", (unsigned)u);
  }
  fclose(f);
  printf("c: wrote %s\n", path);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  if (int8attn_abi_version() != INT8ATTN_ABI_VERSION) {
    fprintf(stderr, "ABI mismatch: library %u, header %d\n", int8attn_abi_version(),
            INT8ATTN_ABI_VERSION);
    return 1;
  }
  static float q[LEN], k[LEN], v[LEN], o[LEN];
  input(q, 1);
  input(k, 2);
  input(v, 3);
  const int64_t shape[4] = {B, H, N, D};
  int8attn_tensor_t tq, tk, tv, to;
  int8attn_tensor_init_contiguous(&tq, q, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4, shape);
  int8attn_tensor_init_contiguous(&tk, k, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4, shape);
  int8attn_tensor_init_contiguous(&tv, v, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4, shape);
  int8attn_tensor_init_contiguous(&to, o, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4, shape);
  int8attn_context_t* ctx = NULL;
  if (int8attn_context_create(&ctx, NULL) != INT8ATTN_OK) {
    fprintf(stderr, "context: %s\n", int8attn_last_error());
    return 1;
  }
  const struct {
    const char* name;
    int32_t mode;
  } modes[] = {{"exact", INT8ATTN_MODE_EXACT}, {"balanced", INT8ATTN_MODE_BALANCED}};
  int rc = 0;
  for (int m = 0; m < 2 && rc == 0; ++m) {
    int8attn_forward_params_t p;
    int8attn_forward_params_init(&p);
    p.mode = modes[m].mode;
    int8attn_status_t s = int8attn_forward(ctx, &tq, &tk, &tv, &to, &p);
    if (s != INT8ATTN_OK) {
      fprintf(stderr, "forward (%s): %s: %s\n", modes[m].name, int8attn_status_string(s),
              int8attn_last_error());
      rc = 1;
    } else {
      rc = write_bits(argv[1], modes[m].name, o);
    }
  }
  int8attn_context_destroy(ctx);
  return rc;
}
