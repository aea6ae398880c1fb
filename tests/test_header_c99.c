/* The public header compiled as strict C99 (-std=c99 -Wall -Wextra -pedantic -Werror): it must
 * be C-clean. The program also calls a few functions to prove the C linkage works. */
#include "int8attn.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  int8attn_tensor_t t;
  int8attn_forward_params_t p;
  int8attn_context_t* ctx = NULL;
  const int64_t shape[4] = {1, 2, 3, 8};
  float data[48];
  int8attn_forward_params_init(&p);
  if (p.struct_size != sizeof p) return 1;
  if (int8attn_abi_version() != INT8ATTN_ABI_VERSION) return 2;
  if (strcmp(int8attn_version_string(), INT8ATTN_VERSION_STRING) != 0) return 3;
  if (int8attn_tensor_init_contiguous(&t, data, INT8ATTN_DEVICE_CPU, 0, INT8ATTN_DTYPE_F32, 4,
                                      shape) != INT8ATTN_OK)
    return 4;
  if (t.strides[0] != 48 || t.strides[3] != 1) return 5;
  if (int8attn_context_create(&ctx, NULL) != INT8ATTN_OK) return 6;
  if (int8attn_forward(ctx, NULL, &t, &t, &t, &p) != INT8ATTN_ERROR_NULL_POINTER) return 7;
  if (strcmp(int8attn_last_error(), "q is NULL") != 0) return 8;
  int8attn_context_destroy(ctx);
  printf("int8attn %s from C99: ok\n", int8attn_version_string());
  return 0;
}
