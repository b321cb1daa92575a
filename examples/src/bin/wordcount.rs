fn main() -> std::process::ExitCode {
    use examples::wordcount as w;
    examples::main_with("wordcount", w::FLAGS, w::USAGE, w::run)
}
