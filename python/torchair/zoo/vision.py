"""Vision models matching torchvision's architectures (structure and parameter shapes).

torchvision is not available, so ResNet-50 (v1.5) and MobileNetV2 are written out
here; their ``state_dict`` keys and shapes are the same as torchvision's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# --------------------------------------------------------------------------- ResNet-50


class Bottleneck(nn.Module):
    """torchvision Bottleneck (v1.5: the stride sits on the 3x3 conv)."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        width = planes
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers: list[int], num_classes: int = 1000) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], stride=2)
        self.layer3 = self._make_layer(256, layers[2], stride=2)
        self.layer4 = self._make_layer(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * Bottleneck.expansion, num_classes)
        for m in self.modules():  # torchvision's init
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * Bottleneck.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * Bottleneck.expansion, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * Bottleneck.expansion),
            )
        layers: list[nn.Module] = [Bottleneck(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * Bottleneck.expansion
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def resnet50(num_classes: int = 1000) -> ResNet:
    return ResNet([3, 4, 6, 3], num_classes)


# --------------------------------------------------------------------------- MobileNetV2


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class Conv2dNormActivation(nn.Sequential):
    """conv -> BatchNorm -> ReLU6 (torchvision.ops.Conv2dNormActivation as used by MobileNetV2)."""

    def __init__(self, cin: int, cout: int, kernel_size: int = 3, stride: int = 1, groups: int = 1) -> None:
        padding = (kernel_size - 1) // 2
        super().__init__(
            nn.Conv2d(cin, cout, kernel_size, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU6(inplace=True),
        )


class InvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = round(inp * expand_ratio)
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden, kernel_size=1))
        layers += [
            Conv2dNormActivation(hidden, hidden, stride=stride, groups=hidden),  # depthwise
            nn.Conv2d(hidden, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0) -> None:
        super().__init__()
        setting = [
            [1, 16, 1, 1],
            [6, 24, 2, 2],
            [6, 32, 3, 2],
            [6, 64, 4, 2],
            [6, 96, 3, 1],
            [6, 160, 3, 2],
            [6, 320, 1, 1],
        ]
        cin = _make_divisible(32 * width_mult)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [Conv2dNormActivation(3, cin, stride=2)]
        for t, c, n, s in setting:
            cout = _make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(cin, cout, s if i == 0 else 1, expand_ratio=t))
                cin = cout
        features.append(Conv2dNormActivation(cin, self.last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=0.2), nn.Linear(self.last_channel, num_classes))
        for m in self.modules():  # torchvision's init
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2(num_classes: int = 1000) -> MobileNetV2:
    return MobileNetV2(num_classes)


# --------------------------------------------------------------------------- ViT-tiny


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(
        self, image_size: int, patch_size: int, dim: int, depth: int, heads: int, mlp_dim: int, num_classes: int
    ) -> None:
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp_dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, N, dim)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def vit_tiny(
    image_size: int = 224,
    patch_size: int = 16,
    dim: int = 192,
    depth: int = 4,
    heads: int = 3,
    mlp_dim: int = 768,
    num_classes: int = 1000,
) -> ViT:
    return ViT(image_size, patch_size, dim, depth, heads, mlp_dim, num_classes)


class DoubleConv(nn.Sequential):
    """(3x3 conv -> BatchNorm -> ReLU) twice: one U-Net level."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        )


class UNet(nn.Module):
    """U-Net (Ronneberger et al.) for segmentation: max-pool down, 2x2 stride-2
    transposed convolutions up, the encoder's map concatenated at each level."""

    def __init__(self, in_channels: int = 3, classes: int = 2, width: int = 32, depth: int = 3) -> None:
        super().__init__()
        chans = [width * 2**i for i in range(depth + 1)]
        self.down = nn.ModuleList([DoubleConv(in_channels, chans[0])])
        self.down.extend(DoubleConv(chans[i], chans[i + 1]) for i in range(depth))
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ModuleList(nn.ConvTranspose2d(chans[i + 1], chans[i], 2, stride=2) for i in reversed(range(depth)))
        self.mix = nn.ModuleList(DoubleConv(2 * chans[i], chans[i]) for i in reversed(range(depth)))
        self.head = nn.Conv2d(chans[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, level in enumerate(self.down):
            x = level(x if i == 0 else self.pool(x))
            skips.append(x)
        skips.pop()
        for up, mix in zip(self.up, self.mix):
            x = mix(torch.cat([up(x), skips.pop()], 1))
        return self.head(x)


def unet_small(classes: int = 2) -> UNet:
    return UNet(3, classes, width=32, depth=3)


# --------------------------------------------------------------------------- detection


class _ConvBNReLU(nn.Sequential):
    def __init__(self, cin: int, cout: int, kernel_size: int = 3, stride: int = 1) -> None:
        super().__init__(nn.Conv2d(cin, cout, kernel_size, stride, kernel_size // 2, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class TinyDetector(nn.Module):
    """A RetinaNet-style detector at toy width: a strided backbone (C3-C5, strides 8-32), a
    feature pyramid (lateral 1x1 convolutions, nearest upsampling to the finer level's size,
    3x3 smoothing) and class/box heads shared by the levels, whose outputs are flattened to
    [N, anchors, ...] and concatenated: the shape arithmetic of detection models over images
    of any size (ceil-divided maps, interpolate's scale from sizes, reshapes by H*W)."""

    def __init__(self, classes: int = 8, anchors: int = 3, width: int = 32) -> None:
        super().__init__()
        self.stem = nn.Sequential(_ConvBNReLU(3, 16, 3, 2), _ConvBNReLU(16, 24, 3, 2))
        self.c3 = nn.Sequential(_ConvBNReLU(24, 32, 3, 2), _ConvBNReLU(32, 32))
        self.c4 = nn.Sequential(_ConvBNReLU(32, 64, 3, 2), _ConvBNReLU(64, 64))
        self.c5 = nn.Sequential(_ConvBNReLU(64, 96, 3, 2), _ConvBNReLU(96, 96))
        self.lateral = nn.ModuleList(nn.Conv2d(c, width, 1) for c in (32, 64, 96))
        self.smooth = nn.ModuleList(nn.Conv2d(width, width, 3, padding=1) for _ in range(3))
        self.cls = nn.Sequential(_ConvBNReLU(width, width), nn.Conv2d(width, anchors * classes, 3, padding=1))
        self.box = nn.Sequential(_ConvBNReLU(width, width), nn.Conv2d(width, anchors * 4, 3, padding=1))
        self.classes = classes

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        c3 = self.c3(self.stem(x))
        c4 = self.c4(c3)
        c5 = self.c5(c4)
        p5 = self.lateral[2](c5)
        p4 = self.lateral[1](c4) + F.interpolate(p5, size=c4.shape[-2:], mode="nearest")
        p3 = self.lateral[0](c3) + F.interpolate(p4, size=c3.shape[-2:], mode="nearest")
        feats = [self.smooth[0](p3), self.smooth[1](p4), self.smooth[2](p5)]
        n = x.shape[0]
        logits = torch.cat([self.cls(f).permute(0, 2, 3, 1).reshape(n, -1, self.classes) for f in feats], 1)
        boxes = torch.cat([self.box(f).permute(0, 2, 3, 1).reshape(n, -1, 4) for f in feats], 1)
        return logits.sigmoid(), boxes
