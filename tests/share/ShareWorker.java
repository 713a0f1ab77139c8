import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

// A share-group member (KafkaShareConsumer) for the tests. Arguments:
//   bootstrap group topic mode idleExitMs [earliest]
// mode: explicit | implicit (share.acknowledgement.mode). In explicit mode a value is
// acknowledged by the first rule whose prefix it starts with ("rel:" -> RELEASE,
// "rej:" -> REJECT, "relN:" -> RELEASE until delivery N, then ACCEPT), else ACCEPT.
// commitSync() after each poll, then one JSON line per record received:
// {"p":partition,"o":offset,"v":value,"d":deliveryCount,"a":ack,"ok":acknowledgement confirmed}; "READY" once subscribed. Exits once idleExitMs passed
// without a record (before the first one, 10 s more: the member may still be joining;
// 0: never). "earliest" first sets the group config
// share.auto.offset.reset=earliest with the admin client.
public class ShareWorker {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", a[0]);
    p.put("group.id", a[1]);
    p.put("key.deserializer", StringDeserializer.class.getName());
    p.put("value.deserializer", StringDeserializer.class.getName());
    p.put("share.acknowledgement.mode", a[3]);
    long idleExit = Long.parseLong(a[4]);
    boolean explicit = a[3].equals("explicit");
    if (a.length > 5 && a[5].equals("earliest")) {
      Properties ap = new Properties();
      ap.put("bootstrap.servers", a[0]);
      try (Admin admin = Admin.create(ap)) {
        ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, a[1]);
        admin.incrementalAlterConfigs(Map.of(r, List.of(new AlterConfigOp(
            new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all().get();
      }
    }
    try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
      c.subscribe(List.of(a[2]));
      System.out.println("READY");
      System.out.flush();
      long last = System.currentTimeMillis();
      boolean got = false;
      while (true) {
        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
        List<String> lines = new ArrayList<>();
        List<Integer> parts = new ArrayList<>();
        for (ConsumerRecord<String, String> r : recs) {
          short d = r.deliveryCount().orElse((short) -1);
          String ack = "ACCEPT";
          if (explicit) {
            String v = r.value() == null ? "" : r.value();
            if (v.startsWith("rel:")) ack = "RELEASE";
            else if (v.startsWith("rej:")) ack = "REJECT";
            else if (v.startsWith("rel") && v.indexOf(':') > 3) {
              int n = Integer.parseInt(v.substring(3, v.indexOf(':')));
              ack = d < n ? "RELEASE" : "ACCEPT";
            }
            c.acknowledge(r, AcknowledgeType.valueOf(ack));
          }
          lines.add("{\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"v\":\"" + r.value()
              + "\",\"d\":" + d + ",\"a\":\"" + ack + "\"");
          parts.add(r.partition());
        }
        if (!recs.isEmpty()) {
          // "ok": whether the broker confirmed this record's acknowledgement (commitSync's
          // answer for its partition)
          Map<Integer, Boolean> ok = new HashMap<>();
          for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : c.commitSync().entrySet())
            ok.put(e.getKey().partition(), e.getValue().isEmpty());
          for (int i = 0; i < lines.size(); i++)
            System.out.println(lines.get(i) + ",\"ok\":" + ok.getOrDefault(parts.get(i), false) + "}");
          last = System.currentTimeMillis();
          got = true;
        }
        System.out.flush();
        if (recs.isEmpty() && idleExit > 0
            && System.currentTimeMillis() - last > (got ? idleExit : idleExit + 10000)) {
          break;
        }
      }
    }
  }
}
