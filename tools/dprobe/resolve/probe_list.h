// The probe list `dprobe probe --add` writes and `dprobe record -e GROUP:EVENT` reads: one
// dynamic_events line per line, '#' comments allowed.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dprobe::tools
{

struct stored_probe {
    std::string line;         // "p:probe_app/parse app:parse a=%di"
    std::string group, event; // from the line's "p:GROUP/EVENT"
    std::string name() const { return group + ":" + event; }
};

// Reads PATH; a missing file is an empty list. Lines that are not probe definitions are
// skipped. Sets *err when the file exists but cannot be read.
std::vector<stored_probe> load_probe_list(const std::string &path, std::string *err = nullptr);
// Writes the list atomically (temporary file + rename), creating the directory.
bool save_probe_list(const std::string &path, const std::vector<stored_probe> &list,
                     std::string *err);
// The group and event of a dynamic_events line, nullopt when it has no explicit name.
std::optional<stored_probe> stored_probe_from_line(const std::string &line);

// Whether SELECTOR ("EVENT", "GROUP:EVENT", "GROUP/EVENT", globs allowed) selects P.
bool probe_selected(const std::string &selector, const stored_probe &p);

} // namespace dprobe::tools
