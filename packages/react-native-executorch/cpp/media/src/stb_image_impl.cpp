// The one translation unit that compiles stb_image (the decoder's own header, from Debian's
// libstb-dev on the host: nothing of it is in this repository). Only the two formats we accept
// are compiled in; files are read by decode_image_file, so stdio is left out.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#define STBI_NO_STDIO
#include <stb_image.h>
