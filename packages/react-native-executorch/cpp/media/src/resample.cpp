// Pillow's resampling (Image.resize with BICUBIC) on 8-bit RGB, written from its documented
// algorithm so that the runner's pixels equal those transformers' PIL image processors feed the
// vision encoder: every constant and rounding step below is one Pillow makes.
#include <algorithm>
#include <cmath>

#include "rne/media/image.h"

namespace rne::media {
namespace {

// Keys' cubic convolution kernel with a = -0.5, support 2.
double bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}
constexpr double kSupport = 2.0;

// 8 bits of result plus 2 of headroom for the kernel's negative lobes in a 32-bit sum.
constexpr int kPrecisionBits = 32 - 8 - 2;

// Per output pixel: the first input index, the number of taps and the fixed-point weights.
struct Coefficients {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;  // out_size x ksize
};

Coefficients precompute(int in_size, int out_size) {
  Coefficients c;
  const double scale = static_cast<double>(in_size) / out_size;
  // Downscaling widens the kernel by the scale factor: that is the antialiasing.
  const double filterscale = std::max(scale, 1.0);
  const double support = kSupport * filterscale;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // Truncating casts, as Pillow's: both are clamped into the image right after.
    int xmin = static_cast<int>(center - support + 0.5);
    xmin = std::max(xmin, 0);
    int xmax = static_cast<int>(center + support + 0.5);
    xmax = std::min(xmax, in_size) - xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = bicubic((x + xmin - center + 0.5) * ss);
      ww += k[x];
    }
    int32_t* w = &c.weights[static_cast<size_t>(xx) * c.ksize];
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? k[x] / ww : k[x];
      // Rounded half away from zero, then truncated to int: Pillow's normalize_coeffs_8bpc.
      w[x] = static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits)
                                        : 0.5 + v * (1 << kPrecisionBits));
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

uint8_t clip8(int32_t sum) {
  const int32_t v = sum >> kPrecisionBits;  // arithmetic shift: floor, as Pillow's lookup
  return static_cast<uint8_t>(std::clamp(v, 0, 255));
}

// One separable pass. `horizontal`: along rows (taps step by a pixel); otherwise along columns
// (taps step by a row). `row_offset` is the first input row a horizontal pass reads.
RgbImage pass(const RgbImage& in, const Coefficients& c, bool horizontal, int out_width,
              int out_height, int row_offset) {
  RgbImage out;
  out.width = out_width;
  out.height = out_height;
  out.pixels.resize(static_cast<size_t>(out_width) * out_height * 3);
  const size_t stride = static_cast<size_t>(in.width) * 3;
  for (int yy = 0; yy < out_height; ++yy) {
    for (int xx = 0; xx < out_width; ++xx) {
      const int o = horizontal ? xx : yy;
      const int32_t* w = &c.weights[static_cast<size_t>(o) * c.ksize];
      const uint8_t* base;
      size_t step;
      if (horizontal) {
        base = &in.pixels[(yy + row_offset) * stride + static_cast<size_t>(c.first[o]) * 3];
        step = 3;
      } else {
        base = &in.pixels[static_cast<size_t>(c.first[o]) * stride + static_cast<size_t>(xx) * 3];
        step = stride;
      }
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int t = 0; t < c.count[o]; ++t) {
        const uint8_t* p = base + t * step;
        s0 += p[0] * w[t];
        s1 += p[1] * w[t];
        s2 += p[2] * w[t];
      }
      uint8_t* q = &out.pixels[(static_cast<size_t>(yy) * out_width + xx) * 3];
      q[0] = clip8(s0);
      q[1] = clip8(s1);
      q[2] = clip8(s2);
    }
  }
  return out;
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& image, int width, int height) {
  const bool need_horizontal = width != image.width;
  const bool need_vertical = height != image.height;
  if (!need_horizontal && !need_vertical) return image;
  const Coefficients vertical = precompute(image.height, height);
  if (!need_horizontal) return pass(image, vertical, false, width, height, 0);

  // The horizontal pass covers only the rows the vertical pass reads.
  const int first_row = vertical.first.front();
  const int last_row = vertical.first.back() + vertical.count.back();
  const Coefficients horizontal = precompute(image.width, width);
  RgbImage rows = pass(image, horizontal, true, width, last_row - first_row, first_row);
  if (!need_vertical) return rows;
  Coefficients shifted = vertical;
  for (int& f : shifted.first) f -= first_row;
  return pass(rows, shifted, false, width, height, 0);
}

}  // namespace rne::media
