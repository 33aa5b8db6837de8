"""Three calls of PyTorch's cuDNN SDPA backend on one prefill shape, for a profiler to catch.

    python3 torch_cudnn_prefill.py LEN:causal|full:HEAD_DIM

Batch 1, bf16, K/V contiguous; 32 query and 8 KV heads (16 and 8 at head_dim 256), as the
attention benchmark's prefill shapes. Used by prefill_vs_cudnn_profile.sh and
prefill_stall_compare.sh beside the same shape of ours.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

length, mask, dim = sys.argv[1].split(":")
length, dim = int(length), int(dim)
heads = 16 if dim == 256 else 32
q = torch.randn(1, heads, length, dim, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 8, length, dim, device="cuda", dtype=torch.bfloat16)
v = torch.randn_like(k)
with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v, is_causal=mask == "causal", enable_gqa=True)
torch.cuda.synchronize()
