// The error hooks libjpeg and libpng call, shared by the decoder (image_decode.cpp) and the writer
// (image_encode.cpp): both libraries report a fatal error through a callback that must not return, so the
// callback stores the library's message and longjmps back to the setjmp of the caller, which turns it into a
// one-line UserError naming the file. PNG warnings are ignored (PIL ignores them too).
// provides: JpegError, jpeg_fail, PngState, png_fail, png_warn
#pragma once
#include <csetjmp>
#include <cstdio>   // jpeglib.h needs FILE declared first
#include <string>

#include <jpeglib.h>
#include <png.h>

namespace retro::image_errors {

struct JpegError {
    jpeg_error_mgr mgr;   // first member: libjpeg's err pointer is cast back to JpegError
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
};

[[noreturn]] inline void jpeg_fail(j_common_ptr cinfo) {
    auto* e = reinterpret_cast<JpegError*>(cinfo->err);
    (*cinfo->err->format_message)(cinfo, e->message);
    std::longjmp(e->jump, 1);
}

struct PngState {
    std::jmp_buf jump;
    std::string message;
};

[[noreturn]] inline void png_fail(png_structp png, png_const_charp msg) {
    auto* s = static_cast<PngState*>(png_get_error_ptr(png));
    s->message = msg ? msg : "libpng error";
    std::longjmp(s->jump, 1);
}

inline void png_warn(png_structp, png_const_charp) {}

}  // namespace retro::image_errors
