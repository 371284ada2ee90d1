// Implementation of man_page.h: walks the CLI11 App tree and writes man(7) roff.
#include "man_page.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <vector>

#include "core/tool_names.h"
#include "core/utf8_sequence.h"
#include "retrokit/version.h"
#include "tool_main.h"

namespace retro {
namespace {

// Text as roff shows it: a backslash as \e, a '-' as \- (a hyphen would be a typographic one, and break where copied
// options must not), a line that would start with '.' or '\'' (a request) behind \&, and a character past ASCII as
// \[uXXXX] (the help's em dashes: roff reads bytes, and only man-db's preconv would take UTF-8).
std::string roff(const std::string& text) {
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    bool line_start = true;
    for (std::size_t i = 0; i < text.size();) {
        const char c = text[i];
        const std::size_t n = utf8_sequence_length(text, i);
        if (n > 1) {
            // the code point: the lead byte's low bits, then 6 bits from each continuation byte
            std::uint32_t cp = static_cast<unsigned char>(c) & (0x7f >> n);
            for (std::size_t k = 1; k < n; ++k) cp = cp << 6 | (static_cast<unsigned char>(text[i + k]) & 0x3f);
            std::string digits;
            for (; cp != 0 || digits.size() < 4; cp >>= 4) digits.insert(digits.begin(), hex[cp & 15]);
            out += "\\[u" + digits + "]";
            i += n;
            line_start = false;
            continue;
        }
        if (line_start && (c == '.' || c == '\'')) out += "\\&";
        if (c == '\\') out += "\\e";
        else if (c == '-') out += "\\-";
        else if (n == 0) out += "\\[uFFFD]";   // (not UTF-8: never in a help text)
        else out += c;
        line_start = c == '\n';
        ++i;
    }
    return out;
}

// The first sentence of the description (up to its first "; ", ". " or line end), for the one NAME line whatis(1)
// reads.
std::string summary(const std::string& description) {
    const std::size_t end = std::min({description.find("; "), description.find(". "), description.find('\n')});
    std::string first = description.substr(0, end);
    while (!first.empty() && (first.back() == '.' || first.back() == ' ')) first.pop_back();
    return first;
}

// A description as roff paragraphs: its lines filled, an indented line (a usage example) kept as typed (.nf/.fi).
std::string paragraphs(const std::string& description) {
    std::string out;
    std::size_t b = 0;
    while (b < description.size()) {
        std::size_t e = description.find('\n', b);
        if (e == std::string::npos) e = description.size();
        const std::string line = description.substr(b, e - b);
        out += line.rfind(' ', 0) == 0 ? ".nf\n" + roff(line) + "\n.fi\n" : roff(line) + "\n";
        b = e + 1;
    }
    return out;
}

// An option's spellings in bold and its value's type in italics: "\fB\-\-out\fR \fITEXT\fR".
std::string option_term(const CLI::Option& opt) {
    std::string names;
    for (const std::string& s : opt.get_snames()) names += (names.empty() ? "" : ", ") + ("\\fB" + roff("-" + s) + "\\fR");
    for (const std::string& l : opt.get_lnames()) names += (names.empty() ? "" : ", ") + ("\\fB" + roff("--" + l) + "\\fR");
    if (opt.get_positional()) {   // its word, and the option it may also be given as (eval's `run` or --run)
        names = "\\fI" + roff(opt.get_name(true)) + "\\fR";
        for (const std::string& l : opt.get_lnames()) names += ", \\fB" + roff("--" + l) + "\\fR";
    }
    const std::string type = opt.get_type_name();
    if (!opt.get_positional() && opt.get_items_expected_max() != 0 && !type.empty()) names += " \\fI" + roff(type) + "\\fR";
    return names;
}

// The option's help, with its default where CLI11's --help gives one (a flag's and an empty one are left out).
std::string option_text(const CLI::Option& opt) {
    std::string text = opt.get_description();
    const std::string def = opt.get_default_str();
    if (opt.get_items_expected_max() != 0 && !def.empty() && def != "[]" && def != "\"\"") text += " (default: " + def + ")";
    if (opt.get_required()) text += " (required)";
    std::string excluded;   // (--help's "Excludes:")
    for (const CLI::Option* other : opt.get_excludes())
        excluded += (excluded.empty() ? "" : ", ") + other->get_name();
    if (!excluded.empty()) text += " (not with " + excluded + ")";
    return roff(text);
}

// "tool sub [OPTIONS] positional..." for the synopsis.
std::string usage(const CLI::App& app, const std::string& command) {
    std::string line = "\\fB" + roff(command) + "\\fR [\\fIOPTIONS\\fR]";
    for (const CLI::Option* opt : app.get_options()) {
        if (!opt->get_positional()) continue;
        std::string word = "\\fI" + roff(opt->get_name(true)) + "\\fR" + (opt->get_items_expected_max() > 1 ? "..." : "");
        line += opt->get_required() ? " " + word : " [" + word + "]";
    }
    if (!shown_subcommands(app).empty()) line += " [\\fICOMMAND\\fR]";
    return line;
}

void options_section(std::ostream& s, const CLI::App& app, bool positionals) {
    for (const CLI::Option* opt : app.get_options()) {
        if (!shown_in_help(*opt) || opt->get_positional() != positionals) continue;
        s << ".TP\n" << option_term(*opt) << "\n" << option_text(*opt) << "\n";
    }
}

void commands(std::ostream& s, const CLI::App& app, const std::string& path, const CLI::App& tool) {
    for (const CLI::App* sub : shown_subcommands(app)) {
        const std::string command = path + " " + sub->get_name();
        s << ".SS \"" << roff(command) << "\"\n" << paragraphs(sub->get_description()) << ".PP\n" << usage(*sub, command) << "\n";
        options_section(s, *sub, true);
        options_section(s, *sub, false);
        std::string down;
        for (const CLI::Option* opt : tool.get_options())
            if (passes_to_subcommands(*opt) && sub->get_option_no_throw("--" + opt->get_lnames().front()) == nullptr)
                down += (down.empty() ? "" : ", ") + ("\\fB" + roff("--" + opt->get_lnames().front()) + "\\fR");
        if (!down.empty()) s << ".PP\nIt takes " << down << " too, before or after its name.\n";
        commands(s, *sub, command, tool);
    }
}

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return s;
}

}  // namespace

std::string man_page(const CLI::App& app, const std::string& tool) {
    std::ostringstream s;
    s << ".\\\" Generated by `" << tool << " --man` from its options (cli/man_page.cpp); do not edit.\n"
      << ".TH \"" << upper(tool) << "\" 1 \"\" \"RetroKit " << RETROKIT_VERSION << "\" \"RetroKit manual\"\n"
      << ".SH NAME\n" << tool << " \\- " << roff(summary(app.get_description())) << "\n"
      << ".SH SYNOPSIS\n" << usage(app, tool) << "\n";
    for (const CLI::App* sub : shown_subcommands(app)) s << ".br\n" << usage(*sub, tool + " " + sub->get_name()) << "\n";
    s << ".SH DESCRIPTION\n" << paragraphs(app.get_description());
    std::ostringstream positionals;
    options_section(positionals, app, true);
    if (!positionals.str().empty()) s << ".SH ARGUMENTS\n" << positionals.str();
    s << ".SH OPTIONS\n";
    options_section(s, app, false);
    if (!shown_subcommands(app).empty()) {
        s << ".SH COMMANDS\n";
        commands(s, app, tool, app);
    }
    s << ".SH EXIT STATUS\n"
      << ".TP\n0\nSuccess.\n"
      << ".TP\n1\nAn internal error (a bug: please report it with the command line).\n"
      << ".TP\n2\nBad input or usage: one line on standard error names the file or option, the problem and, where "
         "possible, the fix. No partial output is left looking complete.\n"
      << ".TP\n130, 143\nStopped by Ctrl\\-C or SIGTERM: the tool says what it keeps (\\fB\\-\\-resume\\fR continues "
         "where it can) and dies of the signal.\n"
      << ".SH ENVIRONMENT\n"
      << ".TP\n\\fBRETRO_MEMORY_LIMIT\\fR\nLowers the memory the tools plan against (8G, 512M, or bytes); a refusal "
         "it causes says so.\n"
      << ".TP\n\\fBRETRO_DISK_FREE\\fR\nLowers the free disk space the tools check their peak writes against.\n"
      << ".TP\n\\fBCUDA_VISIBLE_DEVICES\\fR\nThe GPUs (\\fB\\-\\-device cuda\\fR); under a launcher each rank on a "
         "machine takes the next one listed.\n"
      << ".TP\n\\fBTERM\\fR=dumb\nProgress as a line every 10 seconds instead of a redrawn bar (as when standard "
         "error is not a terminal).\n"
      << ".TP\n\\fBTMPDIR\\fR\nWhere scratch folders go (/tmp otherwise).\n"
      << ".PP\nThe other RETRO_* variables (kernel choices for side-by-side timing, testing) are listed in the "
         "project's docs/tools.md.\n"
      << ".SH SEE ALSO\n";
    std::string others;
    for (const char* other : kRetroTools)
        if (tool != other) others += (others.empty() ? "" : ",\n") + ("\\fB" + roff(other) + "\\fR(1)");
    s << others << "\n.PP\n\\fI" << roff(tool) << " \\-\\-help\\fR, and the project's docs/tools.md.\n";
    return s.str();
}

}  // namespace retro
