import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import javax.security.auth.x500.X500Principal;
import org.apache.kafka.common.security.ssl.SslPrincipalMapper;

/**
 * Reads lines "SUBJECT-DER-HEX RULES-HEX" from standard input and prints, for each,
 * the hex of the UTF-8 of the principal name Kafka's SslPrincipalMapper gives the
 * subject as X500Principal.getName() prints it, or "ERR" and the exception.
 * Run by interop's TestPrincipalsAsKafka with kafka-clients on the class path.
 */
public class Principals {
    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", 2);
            try {
                String dn = new X500Principal(hex.parseHex(parts[0])).getName();
                String rules = new String(hex.parseHex(parts[1]), StandardCharsets.UTF_8);
                String name = SslPrincipalMapper.fromRules(rules).getName(dn);
                System.out.println(hex.formatHex(name.getBytes(StandardCharsets.UTF_8)));
            } catch (Exception e) {
                System.out.println("ERR " + e.toString().replace('\n', ' '));
            }
        }
    }
}
