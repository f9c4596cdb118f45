#include <algorithm>
#include <cstring>
#include <memory>

#include <stb_image.h>

#include "media_file.h"
#include "rne/media/image.h"

namespace rne::media {
namespace {

Error invalid(const std::string& message) { return Error{ErrorCode::kInvalidArgument, message}; }

bool is_png(const uint8_t* data, size_t size) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return size >= 8 && std::memcmp(data, kSignature, 8) == 0;
}

bool is_jpeg(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff;
}

uint32_t be16(const uint8_t* p) { return (uint32_t{p[0]} << 8) | p[1]; }
uint32_t be32(const uint8_t* p) { return (be16(p) << 16) | be16(p + 2); }

// The picture's size from its header alone, so that the pixel budget is checked before the
// decoder allocates anything (stb refuses large sizes itself, with a misleading reason).
bool png_size(const uint8_t* data, size_t size, uint32_t* width, uint32_t* height) {
  // Signature, then the IHDR chunk: length, "IHDR", width, height.
  if (size < 24 || std::memcmp(data + 12, "IHDR", 4) != 0) return false;
  *width = be32(data + 16);
  *height = be32(data + 20);
  return true;
}

std::string chunk_name(const uint8_t* type) {
  std::string name;
  for (int i = 0; i < 4; ++i) {
    const bool printable = type[i] >= 0x20 && type[i] < 0x7f;
    name += printable ? std::string(1, static_cast<char>(type[i]))
                      : "\\x" + std::string(1, "0123456789abcdef"[type[i] >> 4]) +
                            "0123456789abcdef"[type[i] & 15];
  }
  return name;
}

// A PNG's chunks against the file: every declared length must fit in what follows it, and the
// compressed image data must be able to hold the declared pixels. Deflate expands at most
// 1032-fold (a 258-byte match coded in 2 bits), so a few hundred bytes cannot be a 64-megapixel
// picture: refused before the decoder allocates for it.
Result<void> check_png_chunks(const uint8_t* data, size_t size, uint32_t width, uint32_t height) {
  constexpr uint64_t kMaxDeflateRatio = 1032;
  uint64_t idat_bytes = 0;
  size_t at = 8;
  while (at + 8 <= size) {
    const uint64_t length = be32(data + at);
    const uint8_t* type = data + at + 4;
    const size_t left = size - at - 8;
    if (length > left) {
      return invalid("cannot decode the PNG image: its '" + chunk_name(type) +
                     "' chunk at byte " + std::to_string(at) + " declares " +
                     std::to_string(length) + " bytes, only " + std::to_string(left) +
                     " follow: the file is truncated or damaged");
    }
    if (std::memcmp(type, "IDAT", 4) == 0) idat_bytes += length;
    if (std::memcmp(type, "IEND", 4) == 0) break;
    at += 12 + static_cast<size_t>(length);  // length, type, data, CRC
  }
  if (size < 29) return {};  // no whole IHDR: the decoder says what is wrong
  const uint32_t depth = data[24];
  const uint32_t colour = data[25];
  const uint32_t channels = colour == 2 ? 3 : colour == 4 ? 2 : colour == 6 ? 4 : 1;
  // Each row: a filter byte and its packed samples (Adam7 interlacing only adds to this).
  const uint64_t row_bytes = 1 + (uint64_t{width} * channels * depth + 7) / 8;
  const uint64_t raw_bytes = row_bytes * height;
  if (raw_bytes > idat_bytes * kMaxDeflateRatio + 1024) {
    return invalid("cannot decode the PNG image: it declares " + std::to_string(width) + "x" +
                   std::to_string(height) + " pixels but holds " + std::to_string(idat_bytes) +
                   " bytes of compressed image data, too few for that many (at least " +
                   std::to_string(raw_bytes / kMaxDeflateRatio) +
                   "): the file is truncated or damaged");
  }
  return {};
}

// stb's reason for a failure, which some of its paths leave unset.
std::string failure_reason() {
  const char* reason = stbi_failure_reason();
  return reason != nullptr && *reason != '\0' ? reason : "no reason given";
}

bool jpeg_size(const uint8_t* data, size_t size, uint32_t* width, uint32_t* height) {
  size_t at = 2;  // past SOI
  while (at + 4 <= size) {
    if (data[at] != 0xff) return false;
    const uint8_t marker = data[at + 1];
    if (marker == 0xff) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {  // TEM, RSTn, SOI: no length
      at += 2;
      continue;
    }
    const uint32_t length = be16(data + at + 2);
    // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC): precision, height, width.
    if (marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc) {
      if (at + 9 > size) return false;
      *height = be16(data + at + 5);
      *width = be16(data + at + 7);
      return true;
    }
    if (length < 2) return false;
    at += 2 + length;
  }
  return false;
}

// Pillow's alpha_composite of `src` over an opaque white background, in its integer form
// (7 extra bits of precision, rounded division by 255), so the result equals
// `Image.alpha_composite(white, img).convert("RGB")` bit for bit. With the background opaque
// the coefficients reduce to a * 128 and (255 - a) * 128; alpha 255 gives the colour back.
uint8_t over_white(uint32_t colour, uint32_t alpha) {
  constexpr uint32_t kPrecisionBits = 7;
  if (alpha == 0) return 255;
  const uint32_t outa255 = alpha * 255 + 255 * (255 - alpha);
  const uint32_t coef1 = alpha * 255 * 255 * (1u << kPrecisionBits) / outa255;
  const uint32_t coef2 = 255 * (1u << kPrecisionBits) - coef1;
  const uint32_t tmp = colour * coef1 + 255 * coef2 + (0x80u << kPrecisionBits);
  return static_cast<uint8_t>((((tmp >> 8) + tmp) >> 8) >> kPrecisionBits);
}

}  // namespace

Result<Size2D> image_size(const uint8_t* data, size_t size, const DecodeLimits& limits) {
  if (size == 0) return invalid("the image is empty (0 bytes): pass a JPEG or PNG file");
  if (size > limits.max_file_bytes || size > static_cast<size_t>(INT32_MAX)) {
    return invalid("the image file is " + std::to_string(size) + " bytes, over the limit of " +
                   std::to_string(limits.max_file_bytes) + ": downscale or recompress it first");
  }
  const bool png = is_png(data, size);
  if (!png && !is_jpeg(data, size)) {
    return invalid("not a JPEG or PNG image (unrecognised signature): only JPEG and PNG are "
                   "supported; convert the picture to one of them");
  }
  const char* format = png ? "PNG" : "JPEG";
  uint32_t width = 0, height = 0;
  if (!(png ? png_size(data, size, &width, &height) : jpeg_size(data, size, &width, &height))) {
    return invalid(std::string("cannot read the ") + format +
                   " header: the file is corrupt or truncated");
  }
  if (width == 0 || height == 0) {
    return invalid(std::string("the ") + format + " image has no pixels (" +
                   std::to_string(width) + "x" + std::to_string(height) + ")");
  }
  const auto max_pixels = static_cast<uint64_t>(std::max<int64_t>(limits.max_pixels, 0));
  if (uint64_t{width} * height > max_pixels) {
    return invalid(std::string("the image is ") + std::to_string(width) + "x" +
                   std::to_string(height) + " pixels, over the limit of " +
                   std::to_string(limits.max_pixels) + ": downscale it first");
  }
  if (png) {
    if (auto chunks = check_png_chunks(data, size, width, height); !chunks.ok()) {
      return chunks.error();
    }
  }
  return Size2D{static_cast<int>(height), static_cast<int>(width)};
}

Result<RgbImage> decode_image(const uint8_t* data, size_t size, const DecodeLimits& limits) {
  auto checked = image_size(data, size, limits);
  if (!checked.ok()) return checked.error();
  const bool png = is_png(data, size);
  const char* format = png ? "PNG" : "JPEG";
  const std::string unsupported =
      std::string("the file is corrupt, truncated or uses a feature the decoder does not "
                  "support") +
      (png ? "" : " (12-bit or arithmetic-coded JPEG)") + "; re-save it as an ordinary JPEG or PNG";
  // The size the decoder itself reads (its own header walk) is what it allocates for: it must be
  // the size the budget was checked on. Where that walk fails, so does the load below, which
  // gives the precise reason (stbi_info's is a generic one).
  int info_width = checked->width, info_height = checked->height, info_channels = 0;
  if (stbi_info_from_memory(data, static_cast<int>(size), &info_width, &info_height,
                            &info_channels) &&
      (info_width != checked->width || info_height != checked->height)) {
    return invalid(std::string("the ") + format + " image's headers disagree on its size (" +
                   std::to_string(checked->width) + "x" + std::to_string(checked->height) +
                   " and " + std::to_string(info_width) + "x" + std::to_string(info_height) +
                   "): the file is damaged; re-save it as an ordinary JPEG or PNG");
  }
  // PNG: 4 channels out, because stb adds a tRNS chunk's alpha only when it expands channels
  // (and grey comes back replicated). JPEG has no alpha: 3, a quarter less memory.
  const int channels = png ? 4 : 3;
  int got_width = 0, got_height = 0, file_channels = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> decoded(
      stbi_load_from_memory(data, static_cast<int>(size), &got_width, &got_height,
                            &file_channels, channels),
      stbi_image_free);
  if (!decoded) {
    return invalid(std::string("cannot decode the ") + format + " image (" + failure_reason() +
                   "): " + unsupported);
  }
  if (got_width != info_width || got_height != info_height) {
    return invalid(std::string("the ") + format + " image decoded to a size its header does "
                   "not give: the file is damaged; re-save it as an ordinary JPEG or PNG");
  }
  RgbImage out;
  out.width = got_width;
  out.height = got_height;
  const size_t count = static_cast<size_t>(got_width) * got_height;
  const uint8_t* src = decoded.get();
  if (channels == 3) {
    out.pixels.assign(src, src + count * 3);
    return out;
  }
  out.pixels.resize(count * 3);
  uint8_t* dst = out.pixels.data();
  for (size_t i = 0; i < count; ++i, src += 4, dst += 3) {
    const uint32_t alpha = src[3];
    for (int c = 0; c < 3; ++c) dst[c] = alpha == 255 ? src[c] : over_white(src[c], alpha);
  }
  return out;
}

Result<std::string> read_image_file(const std::string& path, const DecodeLimits& limits) {
  return detail::read_media_file(path, limits.max_file_bytes, "image",
                                 "downscale or recompress it first");
}

Result<RgbImage> decode_image_file(const std::string& path, const DecodeLimits& limits) {
  auto bytes = read_image_file(path, limits);
  if (!bytes.ok()) return bytes.error();
  auto image = decode_image(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size(), limits);
  if (!image.ok()) return Error{image.error().code, path + ": " + image.error().message};
  return image;
}

}  // namespace rne::media
