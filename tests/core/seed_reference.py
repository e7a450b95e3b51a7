"""An independent port of the seed recipe's WZMIAOMIAO `vit_model.py` (../shared/seeds/002_…txt, §1),
used only as a reference: its state-dict names and forward are the seed's, not timm's."""

from __future__ import annotations

from collections import OrderedDict
from functools import partial

import torch
from torch import nn


class PatchEmbed(nn.Module):
    def __init__(self, img_size, patch_size, embed_dim):
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(3, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.norm = nn.Identity()

    def forward(self, x):
        return self.norm(self.proj(x).flatten(2).transpose(1, 2))


class Attention(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias, mlp_ratio=4.0):
        super().__init__()
        norm = partial(nn.LayerNorm, eps=1e-6)
        self.norm1, self.attn = norm(dim), Attention(dim, num_heads, qkv_bias)
        self.norm2, self.mlp = norm(dim), Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class SeedVisionTransformer(nn.Module):
    def __init__(self, img_size=224, patch_size=16, num_classes=5, embed_dim=768, depth=12, num_heads=12,
                 mlp_ratio=4.0, qkv_bias=True, representation_size=None, distilled=False):
        super().__init__()
        self.num_tokens = 2 if distilled else 1
        self.patch_embed = PatchEmbed(img_size, patch_size, embed_dim)
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02)
        self.dist_token = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02) if distilled else None
        self.pos_embed = nn.Parameter(
            torch.randn(1, self.patch_embed.num_patches + self.num_tokens, embed_dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(embed_dim, num_heads, qkv_bias, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        features = embed_dim
        if representation_size and not distilled:
            features = representation_size
            self.pre_logits = nn.Sequential(OrderedDict(
                [("fc", nn.Linear(embed_dim, representation_size)), ("act", nn.Tanh())]))
        else:
            self.pre_logits = nn.Identity()
        self.head = nn.Linear(features, num_classes)
        self.head_dist = nn.Linear(embed_dim, num_classes) if distilled else None

    def forward(self, x):
        x = self.patch_embed(x)
        tokens = [self.cls_token.expand(x.shape[0], -1, -1)]
        if self.dist_token is not None:
            tokens.append(self.dist_token.expand(x.shape[0], -1, -1))
        x = torch.cat([*tokens, x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        if self.dist_token is None:
            return self.head(self.pre_logits(x[:, 0]))
        return (self.head(x[:, 0]) + self.head_dist(x[:, 1])) / 2


def seed_transform():
    """The seed predict.py preprocessing, written with torchvision directly."""
    from torchvision import transforms

    return transforms.Compose([
        transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
        transforms.Normalize([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])])
