#pragma once
// What the live replay's LM head keeps, plain C++ so that the calibration fit (host code) names the same number
// the device code allocates.
namespace lcsim::kernels {

/// Bytes a token's logits hold per vocabulary entry: one bf16 buffer, which the backward uses as the logits'
/// gradient (a fused loss writes it in place), so nothing in fp32 and no second buffer.
inline constexpr int kLmHeadLogitsBytesPerVocab = 2;

}  // namespace lcsim::kernels
