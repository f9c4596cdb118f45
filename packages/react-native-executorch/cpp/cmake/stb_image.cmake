# stb_image.h, cpp/media's JPEG/PNG decoder, for every build that compiles cpp/media. Nothing of it
# is in this repository:
# - the host build takes Debian's libstb-dev copy (media/CMakeLists.txt) and patches it here;
# - the phone builds fetch the pinned upstream file (third-party/stb_image.lock.json: URL, size,
#   sha256; the same bytes as Debian bookworm's, which the image parity was measured with), check
#   it and patch it here: android/CMakeLists.txt includes this module, and the iOS podspec runs it
#   as a script at `pod install`:
#     cmake -DRNE_STB_WORK_DIR=<dir> [-DRNE_STB_IMAGE_URL=<url>] -P stb_image.cmake
#   which leaves the patched header at <dir>/include/stb_image.h.
# RNE_STB_IMAGE_URL (a -D variable, else the environment variable) replaces the lock's URL, e.g.
# with a mirror or a file:// copy; the bytes must still match the lock's sha256.

if(CMAKE_VERSION VERSION_LESS 3.21)  # string(JSON), file(COPY_FILE)
  message(FATAL_ERROR "cpp/cmake/stb_image.cmake needs CMake 3.21 or newer (this is "
                      "${CMAKE_VERSION}): install a newer CMake")
endif()

# The pin, from third-party/stb_image.lock.json: in the package itself where a published package
# carries it, else at the monorepo root (as the ExecuTorch binaries are found).
function(_rne_stb_lock out_url out_sha256 out_size)
  set(package_dir "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../..")
  foreach(lock "${package_dir}/third-party/stb_image.lock.json"
               "${package_dir}/../../third-party/stb_image.lock.json")
    if(EXISTS "${lock}")
      file(READ "${lock}" json)
      string(JSON url GET "${json}" url)
      string(JSON sha256 GET "${json}" sha256)
      string(JSON size GET "${json}" size)
      set(${out_url} "${url}" PARENT_SCOPE)
      set(${out_sha256} "${sha256}" PARENT_SCOPE)
      set(${out_size} "${size}" PARENT_SCOPE)
      if(NOT CMAKE_SCRIPT_MODE_FILE)  # a new pin reconfigures
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${lock}")
      endif()
      return()
    endif()
  endforeach()
  get_filename_component(package_dir "${package_dir}" ABSOLUTE)
  message(FATAL_ERROR "third-party/stb_image.lock.json (the pinned stb_image.h) is in neither "
                      "${package_dir} nor the repository above it: restore it from the repository")
endfunction()

# Downloads the pinned stb_image.h to <dest> unless <dest> already holds exactly it. The bytes
# land in <dest>.part and take <dest>'s name only once their sha256 matches the lock, so a failed,
# cut or wrong download leaves no header behind (a wrong one already there is removed first).
function(rne_stb_image_fetch dest)
  _rne_stb_lock(url sha256 size)
  if(RNE_STB_IMAGE_URL)
    set(url "${RNE_STB_IMAGE_URL}")
  elseif(DEFINED ENV{RNE_STB_IMAGE_URL} AND NOT "$ENV{RNE_STB_IMAGE_URL}" STREQUAL "")
    set(url "$ENV{RNE_STB_IMAGE_URL}")
  endif()
  if(EXISTS "${dest}")
    file(SHA256 "${dest}" have)
    if(have STREQUAL sha256)
      return()
    endif()
    file(REMOVE "${dest}")
  endif()
  get_filename_component(dir "${dest}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
  set(part "${dest}.part")
  file(REMOVE "${part}")
  string(CONCAT todo "Check the network (and any proxy), or fetch that file yourself and point "
         "RNE_STB_IMAGE_URL at it (-DRNE_STB_IMAGE_URL=file:///path/to/stb_image.h, or the "
         "environment variable of that name). Its sha256 must be ${sha256}.")
  file(DOWNLOAD "${url}" "${part}" STATUS status TIMEOUT 300 INACTIVITY_TIMEOUT 60
       TLS_VERIFY ON)
  list(GET status 0 code)
  list(GET status 1 reason)
  if(NOT code EQUAL 0)
    file(REMOVE "${part}")
    message(FATAL_ERROR "stb_image.h (cpp/media's image decoder): downloading ${url} failed: "
                        "${reason} (error ${code}). ${todo}")
  endif()
  file(SIZE "${part}" got_size)
  file(SHA256 "${part}" got)
  if(NOT got STREQUAL sha256)
    file(REMOVE "${part}")
    set(cut "")
    if(got_size LESS size)
      set(cut "It is short: the download was cut off, try again. ")
    endif()
    message(FATAL_ERROR "stb_image.h (cpp/media's image decoder): ${url} sent ${got_size} bytes "
                        "with sha256 ${got}, not the pinned file (${size} bytes, sha256 "
                        "${sha256}, third-party/stb_image.lock.json); nothing was written. "
                        "${cut}${todo}")
  endif()
  file(RENAME "${part}" "${dest}")
endfunction()

# Writes <out_dir>/stb_image.h: <header> with these fixes.
# - stb's 4:2:2 (h2v1) chroma upsampling weights the last column's left neighbour 3/4 instead of
#   1/4, so the right edge of such a JPEG comes out with wrong colours (up to 122/255 on noisy
#   chroma, against libjpeg, which PIL uses).
# - Damaged JPEGs that v2.27 mishandles (found by cpp/fuzz, issue #63): a Huffman table (DHT)
#   whose 16 code counts add up to more than 256 made it write past its 257-entry size list and
#   256-entry value list, so it is refused as corrupt; and entropy-coded data that ends inside a
#   code drove its bit count negative (undefined shifts, reads of bits that are not there), so
#   a read past the data's end gives zero bits and a code longer than the bits left is corrupt;
#   an empty PNG chunk (legal) made it memcpy zero bytes to a null buffer (undefined).
# The copy is rewritten only when its bytes change, so a reconfigure recompiles nothing.
# Adds the line <guard> after every line <after> of the text in <source_var> (a warning where
# there is none: another stb version, which the warning on the version also names).
function(_rne_stb_guard source_var after guard)
  string(FIND "${${source_var}}" "${after}\n" at)
  if(at EQUAL -1)
    message(WARNING "stb_image: '${after}' is not there; the header goes without the check "
                    "that follows it")
    return()
  endif()
  string(REPLACE "${after}\n" "${after}\n${guard}\n" patched "${${source_var}}")
  set(${source_var} "${patched}" PARENT_SCOPE)
endfunction()

function(rne_stb_image_patch header out_dir)
  # The parity bounds of tests/encoders/test_image_preprocess.py were measured with v2.27 (Debian
  # bookworm's libstb-dev 0.0~git20220908.8b5f1f3+ds-1, the pinned file); another version may
  # decode JPEG differently by a level here and there.
  get_filename_component(header_dir "${header}" DIRECTORY)
  file(STRINGS "${header}" version LIMIT_COUNT 1 REGEX "stb_image - v[0-9.]+")
  string(REGEX MATCH "v[0-9.]+" version "${version}")
  if(NOT version STREQUAL "v2.27")
    message(WARNING "stb_image ${version} at ${header_dir}: the image parity test's bounds were "
                    "measured with v2.27")
  endif()
  file(READ "${header}" source)
  set(bug "out[i*2+0] = stbi__div4(input[w-2]*3 + input[w-1] + 2);")
  string(FIND "${source}" "${bug}" at)
  if(at EQUAL -1)
    message(WARNING "stb_image ${version}: the 4:2:2 edge line to fix is not there "
                    "(fixed upstream?); using the header as it is")
  else()
    string(REPLACE "${bug}" "out[i*2+0] = stbi__div4(input[w-1]*3 + input[w-2] + 2);"
           source "${source}")
  endif()
  _rne_stb_guard(source "            L -= 17;"
    "            if (n > 256) return stbi__err(\"bad DHT header\",\"Corrupt JPEG\");")
  _rne_stb_guard(source "   if (j->code_bits < n) stbi__grow_buffer_unsafe(j);"
    "   if (j->code_bits < n) return 0;")
  _rne_stb_guard(source "   if (j->code_bits < 1) stbi__grow_buffer_unsafe(j);"
    "   if (j->code_bits < 1) return 0;")
  _rne_stb_guard(source "s = r & 15; // combined length"
    "            if (s > j->code_bits) return stbi__err(\"bad huffman code\",\"Corrupt JPEG\");")
  _rne_stb_guard(source "static int stbi__getn(stbi__context *s, stbi_uc *buffer, int n)\n{"
    "   if (n == 0) return 1;")
  set(patched "${out_dir}/stb_image.h")
  file(WRITE "${patched}.tmp" "${source}")
  file(COPY_FILE "${patched}.tmp" "${patched}" ONLY_IF_DIFFERENT)
  file(REMOVE "${patched}.tmp")
  if(NOT CMAKE_SCRIPT_MODE_FILE)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${header}")
  endif()
endfunction()

# The phone builds: the pinned header fetched to <work_dir>/upstream/stb_image.h, its patched
# copy written to <work_dir>/include/stb_image.h; <include_dir_var> is set to that include folder.
function(rne_stb_image_prepare work_dir include_dir_var)
  rne_stb_image_fetch("${work_dir}/upstream/stb_image.h")
  rne_stb_image_patch("${work_dir}/upstream/stb_image.h" "${work_dir}/include")
  set(${include_dir_var} "${work_dir}/include" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT RNE_STB_WORK_DIR)
    message(FATAL_ERROR "usage: cmake -DRNE_STB_WORK_DIR=<dir> [-DRNE_STB_IMAGE_URL=<url>] "
                        "-P ${CMAKE_CURRENT_LIST_FILE}")
  endif()
  get_filename_component(work_dir "${RNE_STB_WORK_DIR}" ABSOLUTE)
  rne_stb_image_prepare("${work_dir}" include_dir)
  message(STATUS "stb_image.h (pinned, patched): ${include_dir}/stb_image.h")
endif()
