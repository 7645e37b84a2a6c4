/* Placeholder translation unit for a layer with no sources yet. */
typedef int dprobe_empty_translation_unit;
